"""The ladders, one sub-package each; inside, one numbered file per rung."""

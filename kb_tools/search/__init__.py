"""`kb search`: tokenizing, the index, the ranking and its evaluation, and the embedders behind the dense side."""

"""What an autotuner's cost model keeps per graph (models/api.py): the graph's fixed reference,
the measurements of its configs, and the refinement learnt from them; and tune-sim, a search
over a file's configs that measures how much the model helps one."""

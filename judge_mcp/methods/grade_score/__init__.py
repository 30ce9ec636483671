"""Grade Score: multiple-choice judging over every cyclic order, and the pool of unrelated options."""

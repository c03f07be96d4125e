extra set - owner=ml

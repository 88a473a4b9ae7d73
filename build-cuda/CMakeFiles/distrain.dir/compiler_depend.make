# Empty compiler generated dependencies file for distrain.
# This may be replaced when dependencies are built.

# Empty custom commands generated dependencies file for shipped.
# This may be replaced when dependencies are built.

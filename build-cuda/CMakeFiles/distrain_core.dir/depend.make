# Empty dependencies file for distrain_core.
# This may be replaced when dependencies are built.

# Empty dependencies file for distrain_cuda.
# This may be replaced when dependencies are built.

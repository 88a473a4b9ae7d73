# Empty dependencies file for dist_tests.
# This may be replaced when dependencies are built.

"""vtmlir's fuzzer and differential tester (issue 18). Run them with `tools/vt-fuzz` (see its --help);
the smoke runs and the reproducer replay are in test/python/test_fuzz.py."""

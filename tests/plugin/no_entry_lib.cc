// A shared library that is not a kvtier plugin: it exports a function, but not
// kvtier_connector_plugin. Loading it must fail with a message naming the missing symbol.
extern "C" __attribute__((visibility("default"))) int kvtier_not_a_plugin(void) { return 42; }

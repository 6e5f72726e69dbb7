// A shared object that is not an acc plugin: it has no acc_plugin_entry.
extern "C" __attribute__((visibility("default"))) int not_an_acc_plugin() { return 42; }

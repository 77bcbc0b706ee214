# Install rules (headers for out-of-tree plugins, the binary). Filled in by the plugin work.

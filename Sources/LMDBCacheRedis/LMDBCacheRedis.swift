// Placeholder until the client lands: the module needs one source file.

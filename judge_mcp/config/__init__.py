"""Settings: the environment's variables and the TOML file's backends, read and checked."""

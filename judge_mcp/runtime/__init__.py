"""The services a call runs on (the App) and the whole run of a method, from tool arguments to the verdict row."""

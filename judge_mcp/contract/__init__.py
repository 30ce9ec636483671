"""What callers send and get: the tools' argument models, their field types and error sentences, the result models, images."""

"""The model and its device: the one loaded model, the model threads (executors) and the serving measurements."""

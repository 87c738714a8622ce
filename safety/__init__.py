"""Text from outside (the model, the transcriber, a task, a file) made safe to store, print,
log and send on: `safety.text`."""

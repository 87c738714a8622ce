"""The assistant put together from its settings: the parts every room shares (API client, cost
meter, tools, tasks) and those of one microphone and speaker. The commands and the rooms hub
build on it; it imports neither."""

"""Command-line programs: thin absl wrappers around `bert_keras`."""

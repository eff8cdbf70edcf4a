"""Programs that measure bert_keras and print tables."""

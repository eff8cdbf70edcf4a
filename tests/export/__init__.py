"""Tests of bert_keras.export."""

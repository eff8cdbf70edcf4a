"""The training recipe: optimizers and learning-rate schedules."""

from bert_keras.training.optimizers import create_optimizer
from bert_keras.training.schedules import LinearWarmupLinearDecay

"""Sequential recommendation with BERT4Rec: training, evaluation, baselines."""

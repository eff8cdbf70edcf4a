"""One process of a torchrun data-parallel run of `tests.training.two_device_run`'s jobs.

`python -m torch.distributed.run --standalone --nproc_per_node=2 -m
tests.training.torch_ranks_run WORK_DIR pretraining|finetuning` on the torch
backend, with WORK_DIR prepared by `two_device_run.write_job_data`; process 0
writes what the job returns to WORK_DIR/ranks.json.
"""

import json
import os
import sys

from tests.training.two_device_run import JOBS


def main(work_dir, job):
    result = JOBS[job]("data_parallel", work_dir)
    if int(os.environ["RANK"]) == 0:
        result["weights"] = [weights.tolist() for weights in result["weights"]]
        with open(os.path.join(work_dir, "ranks.json"), "w") as file:
            json.dump(result, file)


if __name__ == "__main__":
    main(*sys.argv[1:])

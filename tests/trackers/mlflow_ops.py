"""Run by the test MLflow environment's Python (.venv-mlflow), never imported by the tests:
MLflow's own client creating and reading runs, as a training script would.

argv[1]: the tracking URI; stdin: a JSON list of operations; stdout's last line: a JSON list of
results."""

import json
import sys

from mlflow.tracking import MlflowClient


def main() -> None:
    client = MlflowClient(tracking_uri=sys.argv[1])
    results = []
    for op in json.load(sys.stdin):
        kind = op["op"]
        if kind == "create_run":
            experiment = client.get_experiment_by_name(op["experiment"])
            experiment_id = (
                experiment.experiment_id
                if experiment
                else client.create_experiment(op["experiment"])
            )
            run = client.create_run(
                experiment_id,
                start_time=op.get("start_time"),
                tags=op.get("tags", {}),
                run_name=op.get("name"),
            )
            run_id = run.info.run_id
            for key, value in op.get("params", {}).items():
                client.log_param(run_id, key, value)
            for step, value in op.get("loss", []):
                client.log_metric(run_id, "loss", value, step=step)
            if op.get("status", "RUNNING") != "RUNNING":
                client.set_terminated(run_id, op["status"], end_time=op.get("end_time"))
            results.append(run_id)
        elif kind == "log_loss":
            for step, value in op["loss"]:
                client.log_metric(op["run_id"], "loss", value, step=step)
            results.append(None)
        elif kind == "terminate":
            client.set_terminated(op["run_id"], op["status"], end_time=op.get("end_time"))
            results.append(None)
        elif kind == "tags":
            results.append(dict(client.get_run(op["run_id"]).data.tags))
        else:
            raise SystemExit(f"unknown operation {kind}")
    # MLflow prints links to the runs it ended on stdout: the results are the last line.
    sys.stdout.write("\n" + json.dumps(results) + "\n")


if __name__ == "__main__":
    main()

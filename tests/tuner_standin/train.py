"""Stands in for a training script under the tuner's tests: it trains nothing, and logs what a script logs, fast.

Every iteration of --num-steps steps logs one episode returning --quality x 100 and its charts/SPS, then waits
--step-seconds; the hyperparameters table says where the run ends. --exit-code ends it with that status."""

import sys
import time
from dataclasses import dataclass

import tyro
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter


@dataclass
class Args:
    exp_name: str = "train"
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    env_id: str = "CartPole-v1"
    """the id of the environment"""
    total_timesteps: int = 1000
    """total timesteps of the experiments"""
    num_steps: int = 100
    """the steps of one iteration"""
    quality: float = 1.0
    """each episode returns quality x 100"""
    step_seconds: float = 0.0
    """the time one iteration takes"""
    exit_code: int = 0
    """the exit status (after the first iteration when not 0)"""
    verbose: bool = False
    """an unused bool flag"""


def scalar(tag, value, step):
    value = summary_pb2.Summary.Value(tag=tag, simple_value=value)
    return event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=[value]))


def text(tag, string):
    metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[string.encode()])
    value = summary_pb2.Summary.Value(tag=f"{tag}/text_summary", metadata=metadata, tensor=tensor)
    return event_pb2.Event(wall_time=time.time(), summary=summary_pb2.Summary(value=[value]))


if __name__ == "__main__":
    args = tyro.cli(Args)
    writer = EventFileWriter(f"runs/{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}")
    table = "\n".join(f"|{key}|{value}|" for key, value in [*vars(args).items(), ("batch_size", args.num_steps)])
    writer.add_event(text("hyperparameters", f"|param|value|\n|-|-|\n{table}"))
    for iteration in range(1, args.total_timesteps // args.num_steps + 1):
        step = iteration * args.num_steps
        writer.add_event(scalar("charts/episodic_return", args.quality * 100, step))
        writer.add_event(scalar("charts/SPS", 1000.0, step))
        writer.flush()
        print(f"step {step}", flush=True)
        if args.exit_code:
            print("train.py: error: asked to fail", file=sys.stderr)
            sys.exit(args.exit_code)
        time.sleep(args.step_seconds)
    writer.close()

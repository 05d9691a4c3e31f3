"""Reads a3g's TensorBoard event files with TensorBoard's own loader and prints what
it finds as JSON: every scalar tag with its (step, value) points, and every histogram
tag with its number of events and the value count of the last one.

    PYTHONPATH=.deps/tensorboard python3 scripts/read_tensorboard.py runs/CartPole-v1_training
"""

import json
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main(run_dir):
    # Size guidance 0 keeps every event rather than a sample.
    accumulator = EventAccumulator(run_dir, size_guidance={"scalars": 0, "histograms": 0})
    accumulator.Reload()
    tags = accumulator.Tags()
    scalars = {
        tag: [[event.step, event.value] for event in accumulator.Scalars(tag)]
        for tag in tags["scalars"]
    }
    histograms = {}
    for tag in tags["histograms"]:
        events = accumulator.Histograms(tag)
        histograms[tag] = {"events": len(events), "last_count": events[-1].histogram_value.num}
    print(json.dumps({"scalars": scalars, "histograms": histograms}))


if __name__ == "__main__":
    main(sys.argv[1])

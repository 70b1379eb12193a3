"""
Shape: BindsNET reinforcement-learning example: a library-side action helper pick_by_softmax(pipeline, **kwargs)
that reads the recorded spikes of the output layer from the pipeline, sums them over time and samples an action
from a softmax; a script that builds a spiking Network (Input, LIF hidden and output layers, a reward-modulated
MSTDP connection), a GymEnvironment, an EnvironmentPipeline with the helper as action_function, and a
run_episodes(pipeline, n) loop used for training (learning on) and then testing (learning off).
Bug: the spike record of the output layer is (time, batch=1, n_actions), so after summing over time the counts are
(1, n_actions) and torch.softmax(counts, dim=0) normalises over the batch axis of size one: every probability is
1 and the sampled action is uniformly random, so the agent never acts on its output layer while it learns.
Thread: https://github.com/BindsNET/bindsnet/issues/577
"""
import torch

from bindsnet.encoding import bernoulli
from bindsnet.environment import GymEnvironment
from bindsnet.learning import MSTDP
from bindsnet.network import Network
from bindsnet.network.nodes import Input, LIFNodes
from bindsnet.network.topology import Connection
from bindsnet.pipeline import EnvironmentPipeline


def pick_by_softmax(pipeline, **kwargs):
    layer = kwargs.get("output")
    if layer is None:
        raise KeyError('pick_by_softmax() needs an "output" layer name.')
    n_actions = pipeline.env.action_space.n
    assert pipeline.network.layers[layer].n == n_actions, "output layer must match the action space"
    assert hasattr(pipeline, "spike_record"), "pipeline does not record spikes"

    counts = torch.sum(pipeline.spike_record[layer], dim=0)
    probs = torch.softmax(counts, dim=0)
    return torch.multinomial(probs, num_samples=1).item()


def build_network():
    net = Network(dt=1.0)
    retina = Input(n=80 * 80, shape=[1, 1, 1, 80, 80], traces=True)
    hidden = LIFNodes(n=100, traces=True)
    motor = LIFNodes(n=4, refrac=0, traces=True)
    to_hidden = Connection(source=retina, target=hidden, wmin=0, wmax=1e-1)
    to_motor = Connection(
        source=hidden,
        target=motor,
        wmin=0,
        wmax=1,
        update_rule=MSTDP,
        nu=1e-1,
        norm=0.5 * hidden.n,
    )
    net.add_layer(retina, name="Input Layer")
    net.add_layer(hidden, name="Hidden Layer")
    net.add_layer(motor, name="Output Layer")
    net.add_connection(to_hidden, source="Input Layer", target="Hidden Layer")
    net.add_connection(to_motor, source="Hidden Layer", target="Output Layer")
    return net


def run_episodes(pipeline, n_episodes):
    for ep in range(n_episodes):
        score = 0.0
        pipeline.reset_state_variables()
        finished = False
        while not finished:
            outcome = pipeline.env_step()
            pipeline.step(outcome)
            score += outcome[1]
            finished = outcome[2]
        print(f"episode {ep} reward {score}")


if __name__ == "__main__":
    snn = build_network()
    game = GymEnvironment("BreakoutDeterministic-v4")
    game.reset()
    runner = EnvironmentPipeline(
        snn,
        game,
        encoding=bernoulli,
        action_function=pick_by_softmax,
        output="Output Layer",
        time=100,
        history_length=1,
        delta=1,
        plot_interval=1,
        render_interval=1,
    )
    print("train")
    run_episodes(runner, 100)
    runner.network.learning = False
    print("test")
    run_episodes(runner, 100)

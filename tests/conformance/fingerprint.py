"""Prints this machine's kind, for the conformance records: a short hash of a fixed computation through the float
kernels the scripts use (torch's matrix products, convolutions, LSTM, vectorised elementwise functions and Adam;
NumPy's vectorised transcendental functions; a few MuJoCo physics steps and an XLA program where installed) and of
the versions of the packages that compute the scripts' numbers. Two machines print the same kind when these round
alike; a record compares bitwise only on a kind it holds numbers for (tests/conformance/README.md).

Run it under the environment the scripts run under (thread count, MKL_CBWR, ONEDNN_MAX_CPU_ISA,
ATEN_CPU_CAPABILITY, ...): those are read when the libraries load.

    python tests/conformance/fingerprint.py          # prints {"kind": "...", "versions": {...}}
"""

import hashlib
import importlib.metadata
import json

import numpy as np
import torch

PACKAGES = (
    "torch",
    "numpy",
    "gymnasium",
    "ale-py",
    "opencv-python-headless",
    "mujoco",
    "dm-control",
    "shimmy",
    "envpool",
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "procgen-mirror",
    "pettingzoo",
    "supersuit",
    "multi-agent-ale-py",
)


def versions():
    found = {}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def torch_outputs():
    """The outputs of the kinds of computation the scripts do, at the scripts' shapes, in float32 on the CPU."""
    torch.manual_seed(0)
    outputs = []
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh())
    head = torch.nn.Linear(64, 2)
    for batch in (1, 4, 128):
        outputs.append(head(mlp(torch.randn(batch, 4))))
    cnn = torch.nn.Sequential(
        torch.nn.Conv2d(4, 32, 8, stride=4),
        torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 4, stride=2),
        torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, stride=1),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(64 * 7 * 7, 512),
    )
    frames = torch.randint(0, 256, (8, 4, 84, 84)).float() / 255.0
    hidden = cnn(frames)
    outputs.append(hidden)
    lstm = torch.nn.LSTM(512, 128)
    outputs.append(lstm(hidden.detach().view(4, 2, 512))[0])
    logits = head(mlp(torch.randn(256, 4)))
    probs = torch.distributions.Categorical(logits=logits)
    normal = torch.distributions.Normal(logits, torch.exp(logits))
    outputs += [probs.log_prob(torch.zeros(256, dtype=torch.long)), probs.entropy(), normal.log_prob(logits * 0.5)]
    x = torch.linspace(-5, 5, 1001)
    outputs += [torch.exp(x), torch.tanh(x), torch.log1p(x.abs()), x.std(), x.var(), x.mean()]
    parameters = list(mlp.parameters()) + list(head.parameters())
    optimizer = torch.optim.Adam(parameters, lr=2.5e-4, eps=1e-5)
    for _ in range(3):
        loss = (head(mlp(torch.randn(64, 4))) ** 2).mean() + cnn(frames[:2]).abs().mean() * 0.0
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, 0.5)
        optimizer.step()
    outputs += [p.detach() for p in parameters]
    return [t.detach().contiguous().numpy().tobytes() for t in outputs]


def numpy_outputs():
    x64 = np.linspace(-10, 10, 1001)
    x32 = x64.astype(np.float32)
    outputs = []
    for x in (x64, x32):
        outputs += [
            np.sin(x),
            np.cos(x),
            np.exp(x / 4),
            np.log(np.abs(x) + 1),
            np.tanh(x),
            np.square(x),
            np.sqrt(x * x),
        ]
    outputs += [np.array([np.cos(v) for v in x64[:50]]), x32.mean(), x32.var(), x64.std()]
    return [np.asarray(a).tobytes() for a in outputs]


def mujoco_outputs():
    try:
        import mujoco
    except ImportError:
        return [b"no mujoco"]
    xml = """<mujoco><option timestep="0.01"/><worldbody><body><joint name="a" type="hinge" axis="0 1 0"/>
    <geom type="capsule" fromto="0 0 0 0 0 -1" size="0.05"/><body pos="0 0 -1"><joint type="hinge" axis="0 1 0"/>
    <geom type="capsule" fromto="0 0 0 0 0 -1" size="0.05"/></body></body></worldbody>
    <actuator><motor joint="a" gear="1"/></actuator></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    data.qpos[:] = [0.3, -0.2]
    for t in range(200):
        data.ctrl[:] = np.sin(t / 10)
        mujoco.mj_step(model, data)
    return [data.qpos.tobytes(), data.qvel.tobytes()]


def jax_outputs():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return [b"no jax"]
    x = jnp.linspace(-3, 3, 4096, dtype=jnp.float32).reshape(64, 64)
    kernel = jnp.cos(jnp.linspace(0, 6, 8 * 8 * 4 * 16, dtype=jnp.float32)).reshape(8, 8, 4, 16)
    images = jnp.sin(jnp.linspace(0, 60, 2 * 84 * 84 * 4, dtype=jnp.float32)).reshape(2, 84, 84, 4)
    conv = jax.lax.conv_general_dilated(images, kernel, (4, 4), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    outputs = [jnp.tanh(x @ x.T), jax.nn.log_softmax(x), conv, jnp.linalg.qr(x)[0]]
    return [np.asarray(jax.device_get(a)).tobytes() for a in outputs]


def kind():
    """(kind, versions): the hash of the computations' outputs and of the package versions."""
    digest = hashlib.sha256()
    found = versions()
    digest.update(json.dumps(found, sort_keys=True).encode())
    for output in torch_outputs() + numpy_outputs() + mujoco_outputs() + jax_outputs():
        digest.update(output)
    return digest.hexdigest()[:16], found


if __name__ == "__main__":
    torch.set_num_threads(1)
    name, found = kind()
    print(json.dumps({"kind": name, "versions": found}))

"""Prints jax_conv_dot.hlo (jax 0.10.2): `python jax_conv_dot.py > jax_conv_dot.hlo`. The XLA dumps
beside it come from running f under XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text" and
compiling it. Needs jax, which is no dependency of the project: the tests only read the text."""
import jax
import jax.numpy as jnp
from jax import lax


@jax.jit
def relu(x):
    return jnp.maximum(x, 0)


@jax.jit
def block(x, w):
    y = lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return relu(y)


def f(x, w, q, k):
    h = block(x, w)
    s = jnp.einsum("bqd,bkd->bqk", q, k)
    return h.sum(axis=(1, 2)).reshape(2, 4, 1), jax.nn.softmax(s, axis=-1)


args = (jnp.zeros((2, 8, 8, 3), jnp.bfloat16), jnp.zeros((3, 3, 3, 4), jnp.bfloat16),
        jnp.zeros((2, 4, 8), jnp.float32), jnp.zeros((2, 5, 8), jnp.float32))

if __name__ == "__main__":
    print(jax.jit(f).lower(*args).as_text(dialect="hlo", debug_info=True))

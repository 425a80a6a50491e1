"""`save`: a model file with fitted params written back (through `mujoco.MjSpec`)."""

import os
from pathlib import Path
from typing import Any

import numpy as np

from . import _model


def save(source: Any, path: Any, params: dict[str, Any]) -> Path:
    """Write the MJCF model `source` to `path` with `params` (named after the
    MjModel fields, as `load` and `jl.fit` have them) in place of its values.

    Written back: each body's `body_mass`, `body_ipos`, `body_inertia`
    (principal moments) and `body_iquat` (as an explicit `<inertial>`), each
    joint's `dof_armature`, `dof_damping` (of its first dof) and
    `jnt_stiffness`, and `gravity`. Other params (`ctrl`) are not model
    fields and are left out.

    **Arguments:**

    - `source`: the model as `load` takes it: a path to an MJCF file or an
        MJCF string (an `MjModel` has no file to edit).
    - `path`: where to write the MJCF file.
    - `params`: the params, e.g. `jl.fit(...).params` of the loaded model.

    **Returns:** the path written.

    **Raises:** `ValueError` for a source that is not MJCF text or a file.

    **Example:**

    ```python
    result = jl.fit(system, data, trainable={"body_mass"})
    jl.mujoco.save("arm.xml", "arm_fitted.xml", result.params)
    ```
    """
    import mujoco

    if isinstance(source, str) and source.lstrip().startswith("<"):
        spec = mujoco.MjSpec.from_string(source)
    elif isinstance(source, str | os.PathLike) and Path(source).is_file():
        spec = mujoco.MjSpec.from_file(str(source))
    else:
        raise ValueError(
            "`source` must be the MJCF file or string the model was loaded from, "
            f"got {type(source).__name__}."
        )
    m = spec.compile()
    get = {k: np.asarray(v, float) for k, v in params.items()}
    for b, body in enumerate(spec.bodies):
        if b == 0 or "body_mass" not in get:
            continue
        body.explicitinertial = True
        body.fullinertia = [np.nan, 0, 0, 0, 0, 0]
        body.mass = get["body_mass"][b]
        body.ipos, body.inertia = get["body_ipos"][b], get["body_inertia"][b]
        body.iquat = get["body_iquat"][b] / np.linalg.norm(get["body_iquat"][b])
    for j, joint in enumerate(spec.joints):
        v = m.jnt_dofadr[j]
        if "dof_armature" in get:
            joint.armature = get["dof_armature"][v]
        pairs = (("damping", "dof_damping", v), ("stiffness", "jnt_stiffness", j))
        for field, key, i in pairs:
            if key in get:  # (the first of MuJoCo's polynomial coefficients)
                value = np.array(getattr(joint, field))
                value[0] = get[key][i]
                setattr(joint, field, value)
    if "gravity" in get:
        spec.option.gravity = get["gravity"]
    path = Path(path)
    path.write_text(spec.to_xml())
    _model.read_source(str(path))  # it loads
    return path

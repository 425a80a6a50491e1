"""`save`: a model file with fitted params written back (through `mujoco.MjSpec`)."""

import os
import xml.etree.ElementTree as ET
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
    for b, body in enumerate(spec.bodies[1:] if "body_mass" in get else (), 1):
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
    path.write_text(_full_precision(spec.to_xml(), get, m.jnt_dofadr))
    _model.read_source(str(path))  # it loads
    return path


def _text(x: Any) -> str:
    return " ".join(repr(float(v)) for v in np.atleast_1d(x))


def _full_precision(text: str, get: dict[str, np.ndarray], dofs: np.ndarray) -> str:
    """The values written again with the digits a float64 needs (MuJoCo writes 6)."""
    root = ET.fromstring(text)
    # Bodies and joints appear in the XML in the order of their ids.
    world = root.find("worldbody")
    if "body_mass" in get:
        for b, body in enumerate(world.iter("body"), start=1):
            inertial = body.find("inertial")
            quat = get["body_iquat"][b]
            for attribute, value in (
                ("mass", get["body_mass"][b]),
                ("pos", get["body_ipos"][b]),
                ("diaginertia", get["body_inertia"][b]),
                ("quat", quat / np.linalg.norm(quat)),
            ):
                inertial.set(attribute, _text(value))
    fields = (("armature", "dof_armature"), ("damping", "dof_damping"))
    for j, joint in enumerate(world.iter("joint")):
        at = {"dof_armature": dofs[j], "dof_damping": dofs[j], "jnt_stiffness": j}
        for attribute, key in (*fields, ("stiffness", "jnt_stiffness")):
            if key in get and attribute in joint.attrib:
                words = joint.get(attribute).split()  # a polynomial: its first
                words[0] = _text(get[key][at[key]])
                joint.set(attribute, " ".join(words))
    option = root.find("option")
    if "gravity" in get and option is not None and "gravity" in option.attrib:
        option.set("gravity", _text(get["gravity"]))
    return ET.tostring(root, encoding="unicode")

"""One line per ready system and per param, for `jaxlagrange systems` and
`describe`. SI units; angles in radians."""

# Meanings that several systems share.
_G = {"g": "gravitational acceleration (m/s²)"}
_ROD = {**_G, "l": "length of the rod (m)", "m": "mass of the bob (kg)"}
_RODS = {
    **_G,
    "l1": "length of the upper rod (m)",
    "l2": "length of the lower rod (m)",
    "m1": "mass of the upper bob (kg)",
    "m2": "mass of the lower bob (kg)",
}
_DISK = {**_G, "R": "radius of the disk (m)", "m": "mass of the disk (kg)"}

DESCRIPTIONS: dict[str, tuple[str, dict[str, str]]] = {
    "bouncing_ball": (
        "a point mass dropped onto a floor, bouncing with restitution e",
        {
            **_G,
            "e": "coefficient of restitution, rebound / impact speed, in [0, 1]",
            "m": "mass of the ball (kg)",
        },
    ),
    "cartesian_double_pendulum": (
        "the double pendulum in Cartesian coordinates, rods as holonomic constraints",
        _RODS,
    ),
    "cartesian_pendulum": (
        "a pendulum in Cartesian (x, y), its rod a holonomic constraint",
        _ROD,
    ),
    "cavity": (
        "an optical cavity with a moving mirror: N field modes and the mirror",
        {
            "k": "stiffness of the spring holding the mirror (N/m)",
            "m": "mass of the mirror (kg)",
            "q_eq": "rest length of the cavity, where the spring is relaxed (m)",
        },
    ),
    "charged_particle": (
        "a point charge in uniform magnetic and electric fields",
        {
            "B": "magnetic field, a 3-vector (T)",
            "E": "electric field, a 3-vector (V/m)",
            "charge": "electric charge of the particle (C)",
            "m": "mass of the particle (kg)",
        },
    ),
    "double_pendulum": (
        "two point masses on massless rods, swinging in a vertical plane",
        _RODS,
    ),
    "free_rigid_body": (
        "a torque-free rigid body in unit-quaternion coordinates",
        {
            "I1": "principal moment of inertia about body axis 1 (kg m²)",
            "I2": "principal moment of inertia about body axis 2 (kg m²)",
            "I3": "principal moment of inertia about body axis 3 (kg m²)",
        },
    ),
    "heavy_top": (
        "a symmetric top spinning on a fixed tip under gravity (ZXZ Euler angles)",
        {
            **_G,
            "I1": "transverse moment of inertia about the tip (kg m²)",
            "I3": "moment of inertia about the symmetry axis (kg m²)",
            "l": "distance from the tip to the centre of mass (m)",
            "m": "mass of the top (kg)",
        },
    ),
    "kapitza": (
        "a pendulum whose pivot oscillates vertically as a cos ωt",
        {
            **_ROD,
            "a": "amplitude of the pivot's oscillation (m)",
            "omega": "angular frequency of the pivot's oscillation (rad/s)",
        },
    ),
    "kepler": (
        "a mass in the plane attracted to the origin by −μm/r (orbits)",
        {
            "eps": "softening length ε of the potential −μm/√(r² + ε²), 0 for none",
            "m": "mass of the orbiting body",
            "mu": "gravitational parameter μ = G M of the central body",
        },
    ),
    "mass_on_sphere": (
        "a point mass sliding on top of a fixed sphere until it leaves it",
        {**_G, "R": "radius of the sphere (m)", "m": "mass of the sliding body (kg)"},
    ),
    "pendulum": ("a point mass on a massless rod, swinging in a vertical plane", _ROD),
    "rolling_coin": (
        "a vertical disk rolling without slipping on a plane (nonholonomic)",
        {**_DISK, "alpha": "tilt of the plane about the y-axis (rad), 0 for level"},
    ),
    "rolling_disk": (
        "a uniform disk rolling without slipping down an incline",
        {**_DISK, "alpha": "inclination of the plane (rad)"},
    ),
    "rotating_rod": (
        "a bead sliding on a rod turning at a fixed rate (rheonomic constraint)",
        {"m": "mass of the bead (kg)", "omega": "angular velocity of the rod (rad/s)"},
    ),
    "spherical_pendulum": (
        "a point mass on a massless rod, free to swing in three dimensions",
        _ROD,
    ),
    "spring_chain": (
        "n equal masses in a line, joined by equal springs between two walls",
        {"k": "stiffness of each spring (N/m)", "m": "mass of each body (kg)"},
    ),
    "whipple_bicycle": (
        "the benchmark Whipple bicycle of Meijaard et al. (2007), rolling wheels",
        {
            **_G,
            "IBxx": "rear frame and rider: inertia Ixx about the centre of mass (kg m²)",
            "IBxz": "rear frame and rider: product of inertia Ixz (kg m²)",
            "IByy": "rear frame and rider: inertia Iyy (kg m²)",
            "IBzz": "rear frame and rider: inertia Izz (kg m²)",
            "IFxx": "front wheel: inertia about a diameter (kg m²)",
            "IFyy": "front wheel: inertia about the axle (kg m²)",
            "IHxx": "front fork and handlebar: inertia Ixx (kg m²)",
            "IHxz": "front fork and handlebar: product of inertia Ixz (kg m²)",
            "IHyy": "front fork and handlebar: inertia Iyy (kg m²)",
            "IHzz": "front fork and handlebar: inertia Izz (kg m²)",
            "IRxx": "rear wheel: inertia about a diameter (kg m²)",
            "IRyy": "rear wheel: inertia about the axle (kg m²)",
            "c": "trail (m)",
            "lam": "steer axis tilt from the vertical (rad)",
            "mB": "mass of the rear frame and rider (kg)",
            "mF": "mass of the front wheel (kg)",
            "mH": "mass of the front fork and handlebar (kg)",
            "mR": "mass of the rear wheel (kg)",
            "rF": "radius of the front wheel (m)",
            "rR": "radius of the rear wheel (m)",
            "w": "wheelbase (m)",
            "xB": "rear frame's centre of mass: x from the rear contact (m)",
            "xH": "front fork's centre of mass: x from the rear contact (m)",
            "zB": "rear frame's centre of mass: z, downward (m)",
            "zH": "front fork's centre of mass: z, downward (m)",
        },
    ),
}

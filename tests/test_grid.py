"""Matrix expansion: crossing, include/exclude, defaults and errors that name the key.

A value's own rule (type, enum, range) is the schema's, the rules across keys are grid.py's: the
error tests check a matrix as the workflow does (:func:`check`: the schema, then the grid).
"""

import pytest

from nettebench.study.crossing import ConfigError
from nettebench.study.grid import expand
from nettebench.study.workflow import Study

DATASETS = ["imagenette2-320"]


def check(matrix, section="matrix"):
    """The matrix (or CPU baseline) checked as the workflow checks a config."""
    config = {"datasets": dict.fromkeys(DATASETS), "matrix": {}, section: matrix}
    return Study.from_config(config)


def paths(cells):
    return [c.path().split("/", 1)[1] for c in cells]


def test_seed_study_matrix_matches_the_study():
    matrix = {
        "model": ["resnet18", "resnet34", "resnet50"],
        "precision": ["O0", "O1", "O2", "O3"],
        "batch_size": 256,
        "epochs": 10,
        "exclude": [{"model": "resnet50", "batch_size": 256}],
        "include": [{"model": "resnet50", "batch_size": 128}],
    }
    cells = expand(matrix, section="matrix", datasets=DATASETS)
    assert len(cells) == 12
    by_model = {}
    for cell in cells:
        by_model.setdefault(cell.model, set()).add(cell.batch_size)
    assert by_model == {"resnet18": {256}, "resnet34": {256}, "resnet50": {128}}
    assert {c.precision for c in cells if c.model == "resnet50"} == {"O0", "O1", "O2", "O3"}


def test_axes_default_and_datasets_default_to_all_configured():
    cells = expand({"seed": [0, 1]}, section="matrix", datasets=["a", "b"])
    assert [(c.dataset, c.seed, c.model, c.batch_size) for c in cells] == [
        ("a", 0, "resnet18", 256),
        ("a", 1, "resnet18", 256),
        ("b", 0, "resnet18", 256),
        ("b", 1, "resnet18", 256),
    ]


def test_exclude_list_values_and_defaulted_keys():
    matrix = {"precision": ["O0", "O1", "O3"], "exclude": [{"precision": ["O1", "O3"]}]}
    assert [c.precision for c in expand(matrix, section="m", datasets=DATASETS)] == ["O0"]
    # workers is no axis, but excluding its default value still matches every cell
    matrix = {"model": "resnet18", "exclude": [{"workers": 4}]}
    assert expand(matrix, section="m", datasets=DATASETS) == []


def test_duplicates_collapse():
    matrix = {"model": ["resnet18"], "include": [{"model": "resnet18"}, {"model": "vgg19"}]}
    assert paths(expand(matrix, section="m", datasets=DATASETS)) == [
        "model~resnet18/precision~O0/batch~256/epochs~10/seed~0",
        "model~vgg19/precision~O0/batch~256/epochs~10/seed~0",
    ]


@pytest.mark.parametrize(
    ("matrix", "expected"),
    [
        ({"model": "resnet51"}, r"matrix\.model: unknown model 'resnet51'; did you mean resnet50"),
        (
            {"precision": "O4"},
            r"^matrix\.precision: 'O4' is not allowed; allowed: O0, tf32, O1, O2, O3, bf16, fp32, "
            "or a list of them$",
        ),
        ({"epochs": 0}, r"^matrix\.epochs: 0 is not allowed; allowed: an integer >= 1$"),
        ({"epochs": -3}, r"^matrix\.epochs: -3 is not allowed; allowed: an integer >= 1$"),
        ({"epochs": [1, 0]}, r"^matrix\.epochs\[1\]: 0 is not allowed; allowed: an integer >= 1$"),
        ({"modle": "resnet18"}, r"unknown key\(s\) modle; allowed: dataset, model, precision"),
        ({"dataset": "imagewoof"}, r"'imagewoof' is not allowed; configured datasets: imagenette"),
        (
            {"device": "tpu"},
            r"^matrix\.device: 'tpu' is not allowed; allowed: auto, cpu, cuda, or a list of them$",
        ),
        ({"model": []}, r"^matrix\.model is an empty list; give at least one value$"),
        ({"include": [{"batch": 128}]}, r"matrix\.include\[0\]: unknown key\(s\) batch"),
    ],
)
def test_bad_values_name_the_key_and_the_allowed_values(matrix, expected):
    with pytest.raises(ConfigError, match=expected):
        check(matrix)


def test_a_precision_the_named_device_cannot_run_is_rejected_with_the_reason():
    with pytest.raises(ConfigError, match="O1 .* cannot run on cpu: float16 training needs CUDA"):
        check({"precision": "O1", "device": "cpu"}, section="cpu_baseline")


def test_overrides_apply_unless_an_axis_names_the_parameter():
    cells = expand(
        {"model": "resnet34"},
        section="cpu_baseline",
        datasets=DATASETS,
        overrides={"device": "cpu", "precision": "fp32"},
    )
    assert [(c.device, c.precision) for c in cells] == [("cpu", "fp32")]
    cells = expand(
        {"precision": "bf16"},
        section="cpu_baseline",
        datasets=DATASETS,
        overrides={"device": "cpu", "precision": "fp32"},
    )
    assert [c.precision for c in cells] == ["bf16"]


@pytest.mark.parametrize(
    ("matrix", "expected"),
    [
        ({"amp_backend": "apex", "precision": "bf16"}, "apex takes precision O0, O1, O2, O3"),
        ({"amp_backend": "apex", "device": "cpu"}, "apex needs a CUDA device"),
        ({"amp_backend": "apex", "batch_size": "auto"}, "fixed batch_size"),
        ({"amp_backend": "amp"}, "'amp' is not allowed; allowed: native, apex"),
        (
            {"batch_size": "big"},
            r"batch_size: 'big' is not allowed; allowed: an integer >= 1 or auto$",
        ),
        (
            {"batch_size": 256.0},
            r"batch_size: 256\.0 is not allowed; allowed: an integer >= 1 or auto$",
        ),
        (
            {"channels_last": "yes"},
            "channels_last: 'yes' is not allowed; allowed: true, false, or auto$",
        ),
        (
            {"compile": "yes"},
            "compile: 'yes' is not allowed; allowed: true, false, or a list of them$",
        ),
        ({"compile": True, "amp_backend": "apex"}, "compile needs amp_backend native"),
        (
            {"cudnn_benchmark": "on"},
            "cudnn_benchmark: 'on' is not allowed; allowed: true, false, or",
        ),
        (
            {"loader": "cached", "store_placement": "gpu"},
            "'gpu' is not allowed; allowed: auto, device, host",
        ),
        ({"store_placement": "host"}, "store_placement host needs loader cached"),
        ({"processes": 0}, r"^matrix\.processes: 0 is not allowed; allowed: an integer >= 1$"),
        (
            {"max_steps": 0},
            r"^matrix\.max_steps: 0 is not allowed; allowed: an integer >= 1 or null \(every step",
        ),
        ({"processes": 3, "batch_size": 256}, "batch_size 256 does not split over 3 processes"),
    ],
)
def test_trainer_options_are_validated(matrix, expected):
    with pytest.raises(ConfigError, match=expected):
        check(matrix)


@pytest.mark.parametrize(
    ("matrix", "expected"),
    [
        (
            {"lr": -0.1},
            r"^matrix\.lr: -0\.1 is not allowed; allowed: a number > 0 or null \(the reference: "
            r"0\.1 x batch_size / 256\)$",
        ),
        ({"lr": 0}, r"^matrix\.lr: 0 is not allowed; allowed: a number > 0 or null"),
        (
            {"lr": [0.1, float("nan")]},
            r"^matrix\.lr\[1\]: nan is not allowed; allowed: a number > 0",
        ),
        ({"lr": True}, r"^matrix\.lr: true is not allowed; allowed: a number > 0, null"),
        ({"momentum": -0.9}, r"^matrix\.momentum: -0\.9 is not allowed; allowed: a number >= 0$"),
        (
            {"weight_decay": float("inf")},
            r"^matrix\.weight_decay: inf is not allowed; allowed: a number >= 0$",
        ),
        (
            {"weight_decay": "1e-4"},
            r"^matrix\.weight_decay: '1e-4' is not allowed; allowed: a number >= 0 "
            "or a list of them$",
        ),
    ],
)
def test_numbers_that_cannot_train_are_refused(matrix, expected):
    with pytest.raises(ConfigError, match=expected):
        check(matrix)


def test_sensible_numbers_pass():
    cells = expand(
        {"lr": [None, 0.05], "momentum": 0, "weight_decay": 0.0},
        section="matrix",
        datasets=DATASETS,
    )
    assert sorted(str(c.lr) for c in cells) == ["0.05", "None"]


def test_processes_split_the_global_batch():
    cells = expand({"processes": [1, 2], "batch_size": 64}, section="matrix", datasets=DATASETS)
    assert sorted(c.processes for c in cells) == [1, 2]
    assert [c.path().endswith("/processes~2") for c in cells].count(True) == 1


def test_batch_size_auto_is_a_cell_of_its_own():
    (cell,) = expand({"batch_size": "auto"}, section="matrix", datasets=DATASETS)
    assert "/batch~auto/" in cell.path()


@pytest.mark.parametrize(
    "matrix",
    [
        {"machine": "t4"},
        {"include": [{"model": "resnet50", "machine": "a100"}]},
        {"exclude": [{"machine": "t4"}]},
    ],
)
def test_a_machine_label_is_no_axis(matrix):
    with pytest.raises(ConfigError, match=r"machine labels a whole run.*--config machine=t4"):
        expand(matrix, section="matrix", datasets=["d"])


def test_environment_names_a_configured_package_environment():
    allowed = {"environment": ["installed", "pillow11"]}
    cells = expand(
        {"environment": ["installed", "pillow11"]},
        section="matrix",
        datasets=["d"],
        builds=allowed,
    )
    assert [c.environment for c in cells] == ["installed", "pillow11"]
    with pytest.raises(ConfigError, match=r"environment: 'pillow9'.*environments:.*pillow11"):
        expand({"environment": "pillow9"}, section="matrix", datasets=["d"], builds=allowed)

"""make bench's table of each lesson's test cost (tests/support/lesson_costs.py): every kind of a lesson's test is
found from its id, and what belongs to no one lesson is the rest."""

from tests.support.lesson_costs import attribute, cost_table, costliest, lesson_of_file, lesson_of_test, markdown

LESSONS = {"03-cupy": {"ex-cupy-launch", "ex-cupy-saxpy"}, "09-writing-kernels": {"ex-kernels-launch"}}
CHAPTERS = {"03-cupy": {"cupy"}, "09-writing-kernels": {"kernels"}}
FILES = {"test_kernels_lesson_gpu_paths.py": "09-writing-kernels", "test_gpu_branches.py": None}


def test_each_kind_of_a_lessons_test_is_found_from_its_id():
    cases = {
        "notebooks/03-cupy.ipynb::Cell 4": ("03-cupy", "nbval"),
        "tests/lessons/test_thin_kernel.py::test_notebook_runs[09-writing-kernels.ipynb]":
            ("09-writing-kernels", "thin kernel"),
        "tests/exercises/test_every_exercise.py::test_the_solution_passes[ex-cupy-launch]": ("03-cupy", "exercises"),
        "tests/exercises/test_cupy.py::test_a_launch_is_checked": ("03-cupy", "exercises"),
        "tests/lessons/test_kernels_lesson_gpu_paths.py::test_cells[cuda]": ("09-writing-kernels", "lesson tests"),
        "tests/lessons/test_gpu_branches.py::test_every_branch": ("tests/lessons", "the rest"),
        "tests/exercises/test_every_exercise.py::test_a_label_cannot_be_registered_twice":
            ("tests/exercises", "the rest"),
        "tests/book/test_site.py::test_page[notebooks/03-cupy]": ("tests/book", "the rest"),
    }
    for nodeid, expected in cases.items():
        assert attribute(nodeid, LESSONS, CHAPTERS, FILES) == expected, nodeid


def test_a_label_that_begins_another_is_not_taken_for_it():
    lessons = {"16-performance": {"ex-perf-transpose"}, "17-scale": {"ex-perf-transpose-tiled"}}
    nodeid = "tests/exercises/test_every_exercise.py::test_the_solution_passes[ex-perf-transpose-tiled]"
    assert attribute(nodeid, lessons, {}, {}) == ("17-scale", "exercises")


def test_a_test_file_belongs_to_the_one_lesson_it_names():
    assert lesson_of_file('LESSON = "09-writing-kernels.ipynb"', LESSONS) == "09-writing-kernels"
    assert lesson_of_file("03-cupy and 09-writing-kernels", LESSONS) is None
    assert lesson_of_file("no lesson here", LESSONS) is None


def test_a_test_of_a_file_about_several_lessons_belongs_to_the_lesson_it_names():
    assert lesson_of_test("tests/lessons/test_predictions.py::test_claims[03-cupy/h100]", LESSONS) == "03-cupy"
    assert lesson_of_test("tests/lessons/test_x.py::test_writing_kernels_times_a_launch", LESSONS) \
        == "09-writing-kernels"
    assert lesson_of_test("tests/lessons/test_x.py::test_y[03-cupy-09-writing-kernels]", LESSONS) is None  # two
    assert lesson_of_test("tests/lessons/test_x.py::test_cupy_sizes", LESSONS) == "03-cupy"
    assert lesson_of_test("tests/lessons/test_x.py::test_nothing_named", LESSONS) is None


def test_the_table_adds_each_lesson_and_the_rest():
    costs = {"notebooks/03-cupy.ipynb::Cell 1": 2.0, "notebooks/03-cupy.ipynb::Cell 2": 3.0,
             "tests/exercises/test_cupy.py::test_x": 4.0, "tests/book/test_site.py::test_y": 10.0,
             "tests/unit/core/test_timing.py::test_z": 1.5}
    by_lesson, rest = cost_table(costs, LESSONS, CHAPTERS, FILES)
    assert by_lesson["03-cupy"] == {"nbval": 5.0, "thin kernel": 0.0, "exercises": 4.0, "lesson tests": 0.0}
    assert sum(by_lesson["09-writing-kernels"].values()) == 0.0
    assert rest == {"tests/book": 10.0, "tests/unit": 1.5}
    table = markdown(by_lesson, rest)
    assert "| 03-cupy | 5 | 0 | 4 | 0 | 9 |" in table
    assert "The lessons' tests: 9 core-seconds (4 a lesson on average); the rest: 12; all: 20." in table
    assert "costliest" not in table
    top_two = costliest(costs, 2)
    assert list(top_two) == ["tests/book/test_site.py::test_y", "tests/exercises/test_cupy.py::test_x"]
    assert "| `tests/book/test_site.py::test_y` | 10.0 |" in markdown(by_lesson, rest, top_two)

"""`eukhe mcp` results a model can see and reach, under the real MCP client (`mcp.client.stdio`): a cell's images as
`image` content (a matplotlib plot, an object's `_repr_png_`), the bound on them, and a flood's `resource_link` read
back a page at a time through `resources/read`. Each test has a private daemon (the `world` fixture); cells run on
this interpreter, except the plot's, whose kernel runs on a venv of its own with matplotlib installed from uv's cache
(the versions this interpreter has: the project's dev dependencies).
"""

from __future__ import annotations

import base64
import json
import re
import struct
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from eukhe.core.pictures import MAX_IMAGE_BYTES, MAX_SHOWN, PNG_SIGNATURE
from eukhe.kernel.bootstrap.uvtool import find_uv
from eukhe.mcp.artifacts import PAGE
from tests.real.conftest import DaemonEnv
from tests.real.test_mcp_http import http_client, http_server
from tests.real.test_mcp_server import mcp_server, run, workdir

pytestmark = pytest.mark.real

BUDGET = {"budget_ms": 30_000}


def images(result: types.CallToolResult) -> list[types.ImageContent]:
    return [block for block in result.content if isinstance(block, types.ImageContent)]


def links(result: types.CallToolResult) -> list[types.ResourceLink]:
    return [block for block in result.content if isinstance(block, types.ResourceLink)]


def first_text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def png_size(data: bytes) -> tuple[int, int]:
    """The width and height a PNG's IHDR chunk gives (read here, not with the code under test)."""
    assert data[:8] == PNG_SIGNATURE, data[:16]
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def pinned_closure(name: str) -> list[str]:
    """`name` and everything it requires, pinned to the versions this interpreter has (none when it lacks `name`)."""
    pins: dict[str, str] = {}
    todo = [name]
    while todo:
        wanted = todo.pop()
        key = re.sub(r"[-_.]+", "-", wanted).lower()
        if key in pins:
            continue
        try:
            found = distribution(wanted)
        except PackageNotFoundError:
            continue
        pins[key] = f"{found.metadata['Name']}=={found.version}"
        for requirement in found.requires or []:
            if "extra ==" not in requirement:
                head = re.match(r"[A-Za-z0-9_.-]+", requirement)
                assert head is not None, requirement
                todo.append(head.group(0))
    return sorted(pins.values())


@pytest.fixture
def matplotlib_kernel(world: DaemonEnv) -> Path:
    """A kernel venv of the test's own with matplotlib, installed from uv's cache (from PyPI if the cache lacks
    it); the world's sessions run their cells on it."""
    pins = pinned_closure("matplotlib")
    if not pins:
        pytest.skip("matplotlib is not in the project's environment, so not in uv's cache to install from")
    venv = world.root / "kernel-venv"
    found = find_uv()
    if found is None:
        pytest.skip("no uv on this machine to make the kernel venv with")
    uv = [str(found)]
    base = getattr(sys, "_base_executable", sys.executable)
    made = subprocess.run([*uv, "venv", "-q", "--python", base, str(venv)], check=False, capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"uv could not make a venv: {made.stderr.strip()}")
    python = venv / "bin" / "python"
    install = [*uv, "pip", "install", "-q", "--no-deps", "--python", str(python), *pins]
    done = subprocess.run([*install[:3], "--offline", *install[3:]], check=False, capture_output=True, text=True)
    if done.returncode != 0:
        done = subprocess.run(install, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"matplotlib could not be installed in the kernel venv: {done.stderr.strip()[-400:]}")
    world.env["EUKHE_KERNEL_PYTHON"] = str(python)
    return python


def test_mcp_a_matplotlib_plot_is_an_image_of_the_figure_size(world: DaemonEnv, matplotlib_kernel: Path) -> None:
    cwd = workdir(world)
    plot = (
        "import matplotlib.pyplot as plt\n"
        "fig = plt.figure(figsize=(4, 3), dpi=50)\n"
        "plt.plot([1, 3, 2])\n"
        "print('before')\n"
        "plt.show()\n"
        "print('after')"
    )

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            where = structured(await server.call("ipython", {"code": "import sys\nsys.executable", **BUDGET}))
            assert where["result"] == repr(str(matplotlib_kernel))  # the test's own kernel venv
            shown = await server.call("ipython", {"code": plot, **BUDGET})
            answer = structured(shown)
            (image,) = images(shown)
            assert image.mime_type == "image/png"
            data = base64.b64decode(image.data)
            assert png_size(data) == (200, 150)
            (display,) = answer["displays"]
            assert (display["mime_type"], display["width"], display["height"], display["shown"]) == (
                "image/png",
                200,
                150,
                True,
            )
            assert Path(display["artifact"]).read_bytes() == data  # the image is also an artifact, named
            assert display["bytes"] == len(data)
            assert answer["output"]["text"].startswith("before\n<Figure size 200x150 with 1 Axes>\nafter")
            assert display["artifact"] in first_text(shown)

            last = await server.call("ipython", {"code": "fig = plt.figure(figsize=(2, 1), dpi=30)\nfig", **BUDGET})
            (image,) = images(last)
            assert png_size(base64.b64decode(image.data)) == (60, 30)
            assert structured(last)["result"] == "<Figure size 60x30 with 0 Axes>"

            left_open = await server.call("ipython", {"code": "plt.figure(figsize=(1, 1), dpi=20)\nx = 1", **BUDGET})
            (image,) = images(left_open)  # a figure left open shows at the cell's end, once
            assert png_size(base64.b64decode(image.data)) == (20, 20)
            again = await server.call("ipython", {"code": "x", **BUDGET})
            assert images(again) == []

            picture = await server.call("ipython", {"code": "from PIL import Image\nImage.new('RGB', (7, 5))"})
            (image,) = images(picture)
            assert png_size(base64.b64decode(image.data)) == (7, 5)

    run(scenario)


def test_mcp_an_object_with_repr_png_gives_exactly_its_bytes_and_an_oversized_image_gets_the_notice(
    world: DaemonEnv,
) -> None:
    cwd = workdir(world)
    define = (
        "import struct\n"
        "class Png:\n"
        "    def __init__(self, size, w=3, h=2):\n"
        f"        head = {PNG_SIGNATURE!r} + struct.pack('>I', 13) + b'IHDR' + struct.pack('>II', w, h)\n"
        "        self.data = head + bytes(range(256)) * (size // 256) + b'\\xff' * (size % 256)\n"
        "    def _repr_png_(self):\n"
        "        return self.data\n"
        "small = Png(1000)\n"
        f"big = Png({MAX_IMAGE_BYTES + 1})\n"
    )

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            assert not (await server.call("ipython", {"code": define, **BUDGET})).is_error
            exact = await server.call("ipython", {"code": "small", **BUDGET})
            (image,) = images(exact)
            sent = base64.b64decode(image.data)
            (display,) = structured(exact)["displays"]
            assert sent == Path(display["artifact"]).read_bytes()
            assert sent[:8] == PNG_SIGNATURE and len(sent) == 24 + 1000
            assert (display["width"], display["height"]) == (3, 2)

            oversized = await server.call("ipython", {"code": "display(big)\ndisplay(small)", **BUDGET})
            answer = structured(oversized)
            big, small = answer["displays"]
            assert (big["shown"], big["withheld"], big["bytes"]) == (False, "too_large", 24 + MAX_IMAGE_BYTES + 1)
            assert Path(big["artifact"]).stat().st_size == big["bytes"]  # saved, named, not shown
            assert small["shown"] is True
            assert len(images(oversized)) == 1
            notice = f"[not shown: 1 image over {MAX_IMAGE_BYTES} bytes each"
            assert notice in first_text(oversized)
            assert answer["displays_notice"].startswith(notice)

            many = await server.call("ipython", {"code": f"for _ in range({MAX_SHOWN + 2}):\n    display(small)"})
            answer = structured(many)
            assert len(images(many)) == MAX_SHOWN
            assert [d["withheld"] for d in answer["displays"]] == [None] * MAX_SHOWN + ["over_count"] * 2
            assert f"2 images past the {MAX_SHOWN} an answer shows" in first_text(many)

    run(scenario)


def test_mcp_a_flood_links_its_artifact_and_resources_read_gives_it_back_bounded(world: DaemonEnv) -> None:
    cwd = workdir(world)
    lines = 300_000

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            flood = await server.call("bash", {"command": f"seq 1 {lines}"})
            answer = structured(flood)
            artifact = answer["output"]["artifact"]
            assert artifact is not None
            (link,) = links(flood)
            assert link.uri == Path(artifact).as_uri()
            assert link.size == Path(artifact).stat().st_size
            assert link.mime_type == "text/plain"

            page = await server.client.read_resource(link.uri)
            (contents,) = page.contents
            assert isinstance(contents, types.TextResourceContents)
            body, _, notice = contents.text.rpartition("\n")
            assert len(body.encode()) <= PAGE.max_bytes
            assert body.splitlines()[:3] == ["1", "2", "3"]
            shown = len(body.splitlines())
            assert shown == min(PAGE.max_lines, shown)
            read_on = json.dumps({"path": artifact, "offset": shown + 1})
            assert f"read on with the read tool, {read_on}" in notice
            assert f"lines 1-{shown}" in notice

            nxt = await server.client.read_resource(f"{link.uri}?line={shown + 1}")
            (contents,) = nxt.contents
            assert isinstance(contents, types.TextResourceContents)
            assert contents.text.splitlines()[0] == str(shown + 1)

            end = await server.client.read_resource(f"{link.uri}?line={lines}")
            (contents,) = end.contents
            assert isinstance(contents, types.TextResourceContents)
            assert contents.text.startswith(f"{lines}\n[") and "the end of the artifact" in contents.text

            read = await server.call("read", {"path": artifact, "offset": shown + 1, "limit": 2})
            assert first_text(read).startswith(f"{shown + 1}\n{shown + 2}\n")  # the read tool reads on from there

            for outside in ("file:///etc/passwd", Path(artifact).with_name("none.log").as_uri()):
                with pytest.raises(MCPError):
                    await server.client.read_resource(outside)

    run(scenario)


def test_mcp_resources_list_the_session_jobs_and_each_running_job(world: DaemonEnv) -> None:
    cwd = workdir(world)

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            listed = {str(resource.uri) for resource in (await server.client.list_resources()).resources}
            assert {"eukhe://session/jobs", "eukhe://session/running-jobs"} <= listed
            ran = structured(await server.call("bash", {"command": "echo hi"}))
            jobs = await server.client.read_resource("eukhe://session/jobs")
            (contents,) = jobs.contents
            assert isinstance(contents, types.TextResourceContents)
            assert f"{ran['job']}  bash  exit 0" in contents.text
            assert f"eukhe://session/jobs/{ran['job']}" not in listed  # an ended job is not listed

            go = cwd / "go"
            command = f"echo started; while [ ! -e {go} ]; do sleep 0.01; done; echo over"
            running = structured(await server.call("bash", {"command": command, "budget_ms": 200}))
            assert running["status"] == "detached"
            uri = f"eukhe://session/jobs/{running['job']}"
            listed = {str(resource.uri) for resource in (await server.client.list_resources()).resources}
            assert uri in listed  # a running job is a resource of its own
            (contents,) = (await server.client.read_resource(uri)).contents
            assert isinstance(contents, types.TextResourceContents)
            assert contents.text.startswith("started\n[still running after 1 ms as job")
            go.touch()
            assert structured(await server.call("jobs_wait", {"job": running["job"]}))["exit_code"] == 0
            (contents,) = (await server.client.read_resource(uri)).contents
            assert isinstance(contents, types.TextResourceContents)
            assert contents.text == "started\nover\n[exit 0]"
            with pytest.raises(MCPError):
                await server.client.read_resource("eukhe://session/jobs/job-nosuch")

    run(scenario)


def test_mcp_http_a_plot_is_an_image_and_a_floods_link_reads_back(world: DaemonEnv, matplotlib_kernel: Path) -> None:
    """Over streamable HTTP as over stdio: the same server, so the same images and links."""
    cwd = workdir(world)
    plot = "import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3), dpi=50)\nplt.plot([1, 2])\nplt.show()"

    async def scenario() -> None:
        async with http_client(server) as client:
            shown = await client.call("ipython", {"code": plot, **BUDGET})
            (image,) = images(shown)
            assert image.mime_type == "image/png"
            assert png_size(base64.b64decode(image.data)) == (200, 150)
            flood = await client.call("bash", {"command": "seq 1 100000"})
            (link,) = links(flood)
            (contents,) = (await client.session.read_resource(link.uri)).contents
            assert isinstance(contents, types.TextResourceContents)
            assert contents.text.startswith("1\n2\n")
            assert len(contents.text.encode()) <= PAGE.max_bytes + 1024  # the page and its last line
            assert '"offset": 2001}' in contents.text

    with http_server(world, "--cwd", str(cwd)) as server:
        run(scenario)
        assert server.stop() == 0, server.stderr

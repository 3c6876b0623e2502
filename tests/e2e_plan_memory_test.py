"""End-to-end tests of the memory views of `weftctl plan`.

A graph planned by a real weftd (two simulated devices) through weftctl:
the table ends with a memory table, the trace has a live-bytes counter per
device, and the SVG is well-formed XML that headless Chromium renders to a
picture of the requested size with the nodes' colour in it. The Chromium
test is skipped, saying why, where /usr/bin/chromium (or `chromium` on the
PATH) is missing; tools/install_deps.sh installs it.
"""

import json
import os
import shutil
import subprocess
import struct
import sys
import xml.etree.ElementTree as ElementTree
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("TEST_SRCDIR"):
    sys.path.insert(0, os.path.join(os.environ["TEST_SRCDIR"],
                                    os.environ.get("TEST_WORKSPACE", "weft"), "tests"))

import harness  # noqa: E402
from harness import describe  # noqa: E402

SVG_NS = "{http://www.w3.org/2000/svg}"
WIDTH, HEIGHT = 1200, 800
# The colour of the first op in the SVG's palette (node rects).
FIRST_OP_RGB = (0x4E, 0x79, 0xA7)
CHROMIUM_TIMEOUT_S = 120


def memory_graph():
    """Host data fanned out to four branches that join: buffers die early,
    so live bytes rise and fall. One node name needs escaping in XML."""
    buffers = [
        {"name": "input", "sizeBytes": str(1 << 20), "dtype": "FLOAT32",
         "data": "AAAAAA=="},
        {"name": "sum", "sizeBytes": str(1 << 20), "dtype": "FLOAT32", "output": True},
    ]
    nodes = []
    for i in range(4):
        buffers.append({"name": "t%d" % i, "sizeBytes": str((i + 1) << 20),
                        "dtype": "FLOAT32"})
        nodes.append({"name": "branch%d" % i, "op": "spin",
                      "args": [{"buffer": {"name": "input", "access": "READ"}},
                               {"buffer": {"name": "t%d" % i, "access": "WRITE"}}],
                      "cost": {"estimatedUs": 100 * (i + 1)}})
    for i in range(4):
        nodes.append({"name": 'join<%d> & "more"' % i if i == 0 else "join%d" % i,
                      "op": "spin",
                      "args": [{"buffer": {"name": "t%d" % i, "access": "READ"}},
                               {"buffer": {"name": "sum", "access": "READ_WRITE"}}],
                      "cost": {"estimatedUs": 50}})
    return {"name": "memory_views", "buffers": buffers, "nodes": nodes}


def find_chromium():
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def decode_png(data):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG (signature %r)" % data[:8])
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if zlib.crc32(kind + body) != struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]:
            raise ValueError("bad CRC in chunk %r" % kind)
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    if header is None:
        raise ValueError("no IHDR chunk")
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or colour_type not in (2, 6) or interlace != 0:
        raise ValueError("unsupported PNG: depth %d, colour type %d, interlace %d"
                         % (depth, colour_type, interlace))
    channels = 3 if colour_type == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up = previous[x]
            up_left = previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                predictor = left if pa <= pb and pa <= pc else up if pb <= pc else up_left
                line[x] = (line[x] + predictor) & 0xFF
            elif kind != 0:
                raise ValueError("unknown filter %d in row %d" % (kind, y))
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, channels)])
        previous = line
    return width, height, rows


class PlanMemoryViewsTest(harness.WeftdTestCase):

    def plan(self, *flags):
        path = self.write_file("graph.json", json.dumps(memory_graph()))
        return self.weftctl_ok("plan", path, *flags)

    def test_table_ends_with_memory_per_device(self):
        value = json.loads(self.plan("--json").stdout)
        plan = value.get("plan", value)
        memory = plan.get("memory", [])
        self.assertTrue(memory, "weftd planned no memory: %s" % json.dumps(plan))
        table = self.plan().stdout
        lines = table.splitlines()
        header = [i for i, line in enumerate(lines) if line.startswith("DEVICE  ARENA")]
        self.assertEqual(len(header), 1, table)
        self.assertEqual(lines[header[0]].split(),
                         ["DEVICE", "ARENA", "PEAK_LIVE", "LOWER_BOUND", "BUDGET",
                          "SPILLED", "ORDERINGS_ADDED"])
        rows = lines[header[0] + 1:]
        self.assertEqual(len(rows), len(memory), table)
        for row, m in zip(rows, memory):
            self.assertTrue(row.startswith(str(m.get("device", 0)) + " "), row)
            # No budget asked for: the device's memory.
            self.assertIn("16.0 GiB", row)
            self.assertRegex(row, r"\d+(\.\d)? (B|KiB|MiB|GiB)")

    def test_trace_has_a_live_bytes_counter_per_device(self):
        trace = json.loads(self.plan("--format=trace").stdout)
        counters = {}
        for e in trace["traceEvents"]:
            if e.get("ph") == "C":
                self.assertEqual(e["name"], "live bytes")
                counters.setdefault(e["pid"], []).append((e["ts"], e["args"]["bytes"]))
        self.assertTrue(counters, "no counter events")
        for device, samples in counters.items():
            times = [t for t, _ in samples]
            self.assertEqual(times, sorted(times), device)
            self.assertEqual(len(set(times)), len(times), device)
            self.assertEqual(samples[-1][1], 0, "memory is freed at the end")
            self.assertTrue(all(b >= 0 for _, b in samples), samples)
        # Every buffer of 1 MiB or more lives on some device at some time.
        self.assertGreaterEqual(max(b for s in counters.values() for _, b in s), 1 << 20)

    def render_svg(self):
        svg_path = os.path.join(self.workdir, "plan.svg")
        self.plan("--format=svg", "--out=" + svg_path)
        with open(svg_path, "rb") as f:
            root = ElementTree.fromstring(f.read())  # raises if not well formed
        self.assertEqual(root.tag, SVG_NS + "svg")
        return svg_path, root

    def test_svg_is_well_formed_with_a_rect_per_node(self):
        _, root = self.render_svg()
        node_rects = [r for r in root.iter(SVG_NS + "rect")
                      if r.get("class", "").split()[:1] == ["n"]]
        self.assertEqual(len(node_rects), len(memory_graph()["nodes"]))
        titles = [r.find(SVG_NS + "title").text for r in node_rects]
        self.assertTrue(any(t.startswith('join<0> & "more" (spin)') for t in titles), titles)
        self.assertGreaterEqual(len(list(root.iter(SVG_NS + "path"))), 1, "no area chart")

    def test_chromium_renders_the_svg(self):
        chromium = find_chromium()
        if chromium is None:
            self.skipTest("chromium is not installed (tools/install_deps.sh installs it)")
        svg_path, _ = self.render_svg()
        png_path = os.path.join(self.workdir, "plan.png")
        profile = os.path.join(self.workdir, "chromium-profile")
        env = dict(os.environ, HOME=self.workdir)
        argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
                "--hide-scrollbars", "--no-first-run", "--user-data-dir=" + profile,
                "--screenshot=" + png_path, "--window-size=%d,%d" % (WIDTH, HEIGHT),
                "file://" + svg_path]
        result = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                text=True, timeout=CHROMIUM_TIMEOUT_S, env=env)
        self.assertTrue(os.path.exists(png_path), describe(result))
        with open(png_path, "rb") as f:
            data = f.read()
        outputs = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR")
        if outputs:
            shutil.copy(svg_path, os.path.join(outputs, "plan.svg"))
            shutil.copy(png_path, os.path.join(outputs, "plan.png"))
        width, height, rows = decode_png(data)
        self.assertEqual((width, height), (WIDTH, HEIGHT))
        colours = {}
        for row in rows:
            for pixel in row:
                colours[pixel] = colours.get(pixel, 0) + 1
        self.assertGreater(len(colours), 1, "a single uniform colour")
        white = colours.get((255, 255, 255), 0)
        self.assertGreater(width * height - white, width * height // 100,
                           "less than 1% of the picture is drawn")
        self.assertTrue(
            any(all(abs(c - w) <= 8 for c, w in zip(pixel, FIRST_OP_RGB)) for pixel in colours),
            "no pixel has the colour of the node rects")


if __name__ == "__main__":
    harness.main("e2e_plan_memory_test")

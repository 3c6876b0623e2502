"""Checks on a Plan in its proto3 JSON form (a dict), shared by the e2e tests.

check_plan() returns a list of problems (empty when the plan is sound):
every node of the graph is planned exactly once, in a topological order;
stream and event ids are dense and in range; and every dependency is
implied by stream order or by an event wait (happens-before).
"""


def _deps_of_graph(graph):
    """Names of explicit `after` predecessors, per node (inferred ones come from the plan)."""
    return {n["name"]: list(n.get("after", [])) for n in graph.get("nodes", [])}


def happens_before(plan):
    """For each node, the set of nodes guaranteed finished before it starts."""
    nodes = plan.get("nodes", [])
    last_on_stream = {}
    last_signaller = {}
    before = {}
    for n in nodes:
        name = n["name"]
        stream = n.get("stream", 0)
        done = set()
        prev = last_on_stream.get(stream)
        if prev is not None:
            done |= before[prev] | {prev}
        for event in n.get("waitEvents", []):
            signaller = last_signaller.get(event)
            if signaller is not None:
                done |= before[signaller] | {signaller}
        before[name] = done
        last_on_stream[stream] = name
        # proto3 JSON leaves out zeros: a missing signalEvent is event 0.
        signal = n.get("signalEvent", 0)
        if signal >= 0:
            last_signaller[signal] = name
    return before


def check_plan(plan, graph, num_devices):
    problems = []
    nodes = plan.get("nodes", [])
    names = [n["name"] for n in nodes]
    expected = [n["name"] for n in graph.get("nodes", [])]
    if sorted(names) != sorted(expected):
        problems.append("planned nodes %s != graph nodes %s" % (sorted(names), sorted(expected)))
    streams = plan.get("streams", [])
    for i, s in enumerate(streams):
        if s.get("id", 0) != i:
            problems.append("stream %d has id %s" % (i, s.get("id", 0)))
        if not 0 <= s.get("device", 0) < num_devices:
            problems.append("stream %d on device %s" % (i, s.get("device", 0)))
    num_events = plan.get("numEvents", 0)
    position = {name: i for i, name in enumerate(names)}
    signalled = set()
    for n in nodes:
        name = n["name"]
        stream = n.get("stream", 0)
        if not 0 <= stream < len(streams):
            problems.append("%s: stream %d out of range" % (name, stream))
        elif streams[stream].get("device", 0) != n.get("device", 0):
            problems.append("%s: device %s but its stream is on device %s"
                            % (name, n.get("device", 0), streams[stream].get("device", 0)))
        for dep in n.get("deps", []):
            if dep not in position:
                problems.append("%s: unknown dep %s" % (name, dep))
            elif position[dep] >= position[name]:
                problems.append("%s: dep %s is issued after it" % (name, dep))
        for event in n.get("waitEvents", []):
            if not 0 <= event < num_events:
                problems.append("%s: waits on event %d of %d" % (name, event, num_events))
            elif event not in signalled:
                problems.append("%s: waits on event %d that no earlier node signals"
                                % (name, event))
        signal = n.get("signalEvent", 0)
        if signal >= 0:
            if signal >= num_events:
                problems.append("%s: signals event %d of %d (-1 means none)"
                                % (name, signal, num_events))
            signalled.add(signal)
    if problems:
        return problems
    before = happens_before(plan)
    explicit = _deps_of_graph(graph)
    for n in nodes:
        for dep in list(n.get("deps", [])) + explicit.get(n["name"], []):
            if dep not in before[n["name"]]:
                problems.append("%s: dependency on %s is neither stream order nor an event wait"
                                % (n["name"], dep))
    return problems


def plan_deps(plan):
    return {n["name"]: sorted(n.get("deps", [])) for n in plan.get("nodes", [])}

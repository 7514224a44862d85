"""Slow, exact reference implementations the fast paths are checked against.

networkx builds the code graph edge by edge straight from docs/design.md section 2 and runs its own
Dijkstra; eq. 8 is summed with plain loops over node pairs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import networkx as nx
import numpy as np

from repomem.config import GraphConfig
from repomem.index.fragments import FragmentTable
from repomem.index.graph import directory_chain
from repomem.index.relations import COST_TOLERANCE
from repomem.languages.parsed import FileSyntax
from repomem.languages.python.calls import CallEdge


def reference_graph(files: Sequence[FileSyntax | None], calls: Sequence[CallEdge], config: GraphConfig) -> nx.Graph:
    """Nodes: ("syntax", file, local) / ("file", file) / ("dir", path). Edge attribute `w`."""
    graph = nx.Graph()

    def link(a, b, weight):
        if a == b:
            return
        if graph.has_edge(a, b):
            weight = max(weight, graph.edges[a, b]["w"])
        graph.add_edge(a, b, w=weight, cost=-math.log(weight))

    for file_id, syntax in enumerate(files):
        if syntax is None:
            continue
        for local in range(syntax.n_nodes):
            graph.add_node(("syntax", file_id, local))
            parent = int(syntax.parent[local])
            if parent >= 0:
                link(("syntax", file_id, local), ("syntax", file_id, parent), config.syntax_weight)
        link(("file", file_id), ("syntax", file_id, 0), config.file_root_weight)
        chain = directory_chain(syntax.path)
        for upper, lower in zip(chain, chain[1:]):
            link(("dir", upper), ("dir", lower), config.directory_weight)
        link(("dir", chain[-1]), ("file", file_id), config.directory_weight)
    for call in calls:
        weight = config.call_weight * config.syntax_weight ** call.hops
        link(("syntax", call.source_file, call.source_node), ("syntax", call.target_file, call.target_node), weight)
    return graph


def reference_strengths(graph: nx.Graph, sources, cutoff: float, max_reach: int = 0) -> dict:
    """Dis(a, b) for a in sources: max-product path strength, 0 below the cutoff. With
    `max_reach` > 0, the max_reach nearest, less the cost level the cut falls in, if it does
    (costs within COST_TOLERANCE tie)."""
    limit = -math.log(cutoff) + COST_TOLERANCE
    out = {}
    for source in sources:
        lengths = nx.single_source_dijkstra_path_length(graph, source, cutoff=limit, weight="cost")
        if 0 < max_reach < len(lengths):
            ordered = sorted(lengths.values())
            last_kept, first_left = ordered[max_reach - 1], ordered[max_reach]
            if first_left - last_kept <= COST_TOLERANCE:  # the cap cuts a cost level: it all goes
                lengths = {target: cost for target, cost in lengths.items() if cost < last_kept - COST_TOLERANCE}
            else:
                lengths = {target: cost for target, cost in lengths.items() if cost <= last_kept}
        out[source] = {target: math.exp(-cost) for target, cost in lengths.items()}
    return out


def reference_relation(
    table: FragmentTable, node_key, graph: nx.Graph, cutoff: float, live: np.ndarray, same_file_weight: float = 1.0,
) -> np.ndarray:
    """Dense W of eq. 8 (diagonal 0), pairs of one file times `same_file_weight`.
    `node_key(global id)` maps fast-path ids to graph nodes."""
    n = table.size
    members = [
        [(node_key(int(table.nodes[s])), float(table.weights[s])) for s in range(table.indptr[i], table.indptr[i + 1])]
        for i in range(n)
    ]
    sources = {key for fragment in members for key, _ in fragment}
    strengths = reference_strengths(graph, sources, cutoff)
    w = np.zeros((n, n))
    for i in range(n):
        if not live[i]:
            continue
        for j in range(n):
            if i == j or not live[j]:
                continue
            numerator = 0.0
            denominator = 0.0
            for key_k, len_k in members[i]:
                row = strengths[key_k]
                for key_l, len_l in members[j]:
                    numerator += len_k * len_l * row.get(key_l, 0.0)
                    denominator += len_k * len_l
            w[i, j] = numerator / denominator if denominator else 0.0
            if table.file[i] == table.file[j]:
                w[i, j] *= same_file_weight
    return w


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insert, delete, substitute: cost 1 each) by the textbook dynamic programme."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


def reference_call_owners(root, kept_index: dict[int, int]) -> list[tuple[int, int]]:
    """(nearest kept ancestor of each call's `function` child, parent steps from the call up to it),
    walking tree-sitter parents one at a time for every call: the definition of `CallSite.node`
    and `CallSite.hops` (the fast path remembers the ancestors it has placed)."""
    from repomem.languages.python.syntax import CALL_QUERY, LANGUAGE_NAME, dotted_name
    from repomem.languages.treesitter import capture_nodes

    owners = []
    for callee in capture_nodes(LANGUAGE_NAME, CALL_QUERY, root, "callee"):
        if dotted_name(callee) is None:
            continue
        owner, hops = callee.parent, 0
        while owner is not None and owner.id not in kept_index:
            owner, hops = owner.parent, hops + 1
        owners.append((kept_index[owner.id] if owner is not None else 0, hops))
    return owners


def reference_cover(syntax: FileSyntax, starts: np.ndarray, ends: np.ndarray) -> list[tuple[int, int, int]]:
    """(window, node, weight) covering each window [a, b) as docs/design.md section 3 defines it,
    every node tried against every window: its maximal whole nodes (weight: bytes), then, for each
    non-blank line no whole node holds, the innermost node spanning it (weight: the non-blank
    characters of all such lines it owns), in order of first such line."""
    n_lines = int(syntax.line_chars.shape[0])
    start, end, parent = syntax.start_line.tolist(), syntax.end_line.tolist(), syntax.parent.tolist()
    owner = [0] * n_lines
    for node in range(syntax.n_nodes):  # deeper nodes come later in walk order and win
        for line in range(max(start[node], 0), min(end[node], n_lines - 1) + 1):
            owner[line] = node
    out = []
    for w, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
        inside = [start[node] >= a and end[node] <= b - 1 for node in range(syntax.n_nodes)]
        whole = [node for node in range(syntax.n_nodes)
                 if inside[node] and not (parent[node] >= 0 and inside[parent[node]])]
        out += [(w, node, max(int(syntax.length[node]), 1)) for node in whole]
        covered = {line for node in whole for line in range(start[node], end[node] + 1)}
        partial: dict[int, int] = {}
        for line in range(a, b):
            if line not in covered and syntax.line_chars[line] > 0:
                partial[owner[line]] = partial.get(owner[line], 0) + int(syntax.line_chars[line])
        out += [(w, node, chars) for node, chars in partial.items()]
    return out


def reference_mask_secrets(text: str, min_length: int = 12, min_entropy: float = 3.5) -> tuple[str, int]:
    """Secrets masked by running each pattern over the whole text, every position tried: what
    `mask_secrets` must equal without its prefilters (key literals, lines holding "://", name runs
    holding a secret word's literal; multiple assignments tried on every line, not only those, and
    login calls at every position)."""
    from repomem.index import secrets

    found = 0

    def count(replacement):
        def replace(match):
            nonlocal found
            result = replacement(match)
            found += result != match.group(0)
            return result
        return replace

    def private(match):
        body = match["body"]
        return match.group(0).replace(body, "\n".join(secrets.MASK if line.strip() else line
                                                       for line in body.split("\n")), 1)

    text = secrets._PRIVATE_KEY.sub(count(private), text)
    text = secrets._PRIVATE_KEY_OPEN.sub(count(private), text)
    masked_putty = secrets._mask_putty_private_lines(text)
    text, found = masked_putty[0], found + masked_putty[1]
    masked_keys = secrets._mask_base64_private_keys(text)  # the fast path runs it where the head is
    text, found = masked_keys[0], found + masked_keys[1]
    masked_manifests = secrets._mask_kubernetes_secret_data(text)  # the fast path: where "kind:" and "Secret" are
    text, found = masked_manifests[0], found + masked_manifests[1]
    masked_objects = secrets._mask_kubernetes_secret_json(text)  # the fast path: where "kind" and "Secret" are
    text, found = masked_objects[0], found + masked_objects[1]
    masked_web_keys = secrets._mask_json_web_keys(text)  # the fast path: where "kty" is
    text, found = masked_web_keys[0], found + masked_web_keys[1]
    text = _reference_token_secrets(text, count, _reference_public_web_key_values(text))

    def url(match):
        return match.group(0) if match["secret"] == secrets.MASK else match["head"] + secrets.MASK

    def url_token_user(match):
        return url(match) if secrets.random_body(re.sub(r"[._~-]", "", match["secret"])) else match.group(0)

    def signed(match):
        secret = match["secret"]
        return match.group(0) if secrets.MASK in secret or secrets.reads_as_words(secret) else url(match)

    def url_password(match):
        password = match["secret"]
        return match.group(0) if not any(c.isdigit() for c in password) and secrets.reads_as_words(password) \
            else url(match)

    text = secrets._URL_TOKEN_USER.sub(count(url_token_user), secrets._WEBHOOK_PATH.sub(
        count(url), secrets._URL_PASSWORD.sub(count(url_password), text)))
    text = secrets._GO_DSN_PASSWORD.sub(count(url), text)
    text = secrets._MYSQL_GLUED_PASSWORD.sub(count(signed), text)
    masked_logins = secrets._mask_basic_auth_values(text)
    text, found = masked_logins[0], found + masked_logins[1]
    text = secrets._SIGNED_QUERY.sub(count(signed), text)
    masked_piped = secrets._mask_piped_secure_strings(text, min_length, min_entropy)  # the fast path: where
    text, found = masked_piped[0], found + masked_piped[1]  # "convertto-securestring" is, in any case
    every_line = [0, *(at + 1 for at, character in enumerate(text) if character == "\n")]
    logins = [secrets.login_value(match, min_length, min_entropy) for match in secrets._LOGIN_CALL.finditer(text)]
    placed = secrets.apart(secrets.multiple_assignment_secrets(text, every_line, min_length, min_entropy)
                           + [span for span in logins if span is not None])
    found += len(placed)
    text = secrets._masked_spans(text, placed)
    pieces: list[str] = []
    position = 0
    for match in secrets._ASSIGNED.finditer(text):
        masked = None if match.start() < position else secrets.masked_assignment(match, min_length, min_entropy)
        if masked is not None:
            found += 1
            pieces += [text[position:match.start()], masked[1]]
            position = masked[0]
    pieces.append(text[position:])
    return "".join(pieces), found


def reference_candidate_runs(text: str) -> list[tuple[int, int]]:
    """`secret_tokens.candidate_runs` by a regex over the runs of token characters, each run's
    kinds, changes of kind and AWS heads read character by character."""
    from repomem.index import secret_tokens

    runs = re.compile(f"[{re.escape(secret_tokens.TOKEN_CHARACTERS)}]{{{secret_tokens.MIN_RUN},}}")
    aws_head = re.compile(r"A(?:3T|KIA|SIA|BIA|CCA)")
    found = []
    for match in runs.finditer(text):
        run = match.group(0)
        kinds = [1 if c in "0123456789" else 2 if "A" <= c <= "Z" else 3 if "a" <= c <= "z" else 0 for c in run]
        upper, digit, lower = 2 in kinds, 1 in kinds, 3 in kinds
        head = aws_head.search(run) is not None
        if upper and not digit and not lower:
            kept = head
        elif upper or digit:
            mixes = sum(1 for a, b in zip(kinds, kinds[1:]) if a and b and a != b)
            kept = mixes >= max(secret_tokens.MIN_MIXES, secret_tokens.MIX_SHARE * len(run)) or (upper and head)
        else:
            kept = False
        if kept:
            found.append(match.span())
    return found


def _reference_public_web_key_values(text: str) -> list[tuple[int, int]]:
    """The public members' values of the JSON Web Keys (JSON or YAML) holding no private member,
    found again in the masked text (a masked private member still names one), where the fast path
    moves the places it found before masking by what the masks added."""
    from repomem.index import secrets

    return sorted((start, end) for members in secrets.web_key_members(text)
                  if not any(other in secrets._JWK_PRIVATE_MEMBERS for other, _, _ in members)
                  for name, start, end in members if name in secrets._JWK_PUBLIC_MEMBERS)


def _reference_token_secrets(text: str, count, public_keys: list[tuple[int, int]] = ()) -> str:
    """Token secrets by a plain regex over every run of token characters (no byte translation, no
    substring skipping): each run at least MIN_RUN long holding a digit and a letter, or an AWS key
    id's head, is matched against the provider shapes, else the prefixed-token rule (which leaves
    the runs inside `public_keys`, the public members of public JSON Web Keys)."""
    from repomem.index import secret_tokens

    runs = re.compile(f"[{re.escape(secret_tokens.TOKEN_CHARACTERS)}]{{{secret_tokens.MIN_RUN},}}")
    aws_head = re.compile(r"A(?:3T|KIA|SIA|BIA|CCA)")

    def replace_run(match):
        run, prefix = match.group(0), ""
        kinds = [1 if c in "0123456789" else 2 if "A" <= c <= "Z" else 3 if "a" <= c <= "z" else 0 for c in run]
        mixes = sum(1 for a, b in zip(kinds, kinds[1:]) if a and b and a != b)
        if mixes < max(secret_tokens.MIN_MIXES, secret_tokens.MIX_SHARE * len(run)) and not aws_head.search(run):
            return run
        start = match.start()
        if start and text[start - 1] == "\\":
            prefix, run, start = run[0], run[1:], start + 1
        if secret_tokens.wordy(run) and not aws_head.search(run):
            return prefix + run
        if run.startswith("bot") and run[3:4].isdigit():  # Telegram's API URL: a token after `bot`
            masked = "bot" + secret_tokens._PROVIDER.sub(count(lambda _: "[REDACTED]"), run[3:])
        else:
            masked = secret_tokens._PROVIDER.sub(count(lambda _: "[REDACTED]"), run)
        if masked == run and (secret_tokens.prefixed_token(run) is not None
                              or secret_tokens.argument_literal(text, start, match.end())) \
                and not any(low <= start and match.end() <= high for low, high in public_keys):
            masked = count(lambda _: "[REDACTED]")(match)
        return prefix + masked

    return runs.sub(replace_run, text)


def reference_kept_tree(root, language, granularity: str, last_line: int, source_bytes: int):
    """The kept nodes by the rules of `repomem.languages.syntax` applied to every named node the
    walk reaches, with no shortcut: each child of a descended node is visited and judged on its
    own. Returns (parents, starts, ends, lengths, class scopes, definitions, imports)."""
    from repomem.languages.syntax import _CONTAINERS, _NEVER_KEPT

    symbols = language.symbols() if language.symbols is not None else None
    watched = symbols.watched_types if symbols is not None else frozenset()
    named = granularity == "named"
    parents, starts, ends, lengths, scopes = [-1], [0], [last_line], [source_bytes], [""]

    def visit(node, kept_parent: int, parent_type: str, scope: str, inside_function: bool) -> None:
        kind = node.type
        kept = kind not in _NEVER_KEPT and (
            named or parent_type in _CONTAINERS or kind in _CONTAINERS or kind in language.clause_types
            or kind.endswith(language.statement_suffixes))
        own = kept_parent
        if kept:
            own = len(parents)
            parents.append(kept_parent)
            starts.append(node.start_point[0])
            end_row, end_column = node.end_point
            ends.append(end_row - 1 if end_column == 0 and end_row > node.start_point[0] else end_row)
            lengths.append(node.end_byte - node.start_byte)
            scopes.append(scope)
        if kind in watched:
            scope, inside_function = symbols.enter(node, own, scope, inside_function)
        if named or language.statements_in_expressions or kept or kind in _CONTAINERS or kind == "ERROR":
            for child in node.named_children:
                visit(child, own, kind, scope, inside_function)

    for child in root.named_children:
        visit(child, 0, root.type, "", False)
    definitions = tuple(symbols.definitions) if symbols is not None else ()
    imports = tuple(symbols.imports) if symbols is not None else ()
    return parents, starts, ends, lengths, scopes, definitions, imports

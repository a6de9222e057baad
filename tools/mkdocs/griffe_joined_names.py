"""A griffe extension for the API pages: the docstrings document several
arguments at once, Keras' way, in a name list that may wrap:

    kernel_initializer, recurrent_initializer, bias_initializer,
        peephole_initializer: Initializers of W, U, b and the peepholes.

Google-style parsers read a name list on one line only; this joins a
wrapped one, so that its arguments appear on the page instead of being
skipped. The docstrings in the source are left as they are.
"""

import re

import griffe

# A line of names, each followed by a comma, nothing else.
NAMES = re.compile(r"^(\s*)(\*{0,2}\w+,\s*)+$")
# Its continuation: more names, then the colon of the description.
CONTINUED = re.compile(r"^\s*(\*{0,2}\w+,\s*)*\*{0,2}\w+:(\s|$)")


def join_wrapped_names(text):
    lines = text.split("\n")
    joined = []
    index = 0
    while index < len(lines):
        line = lines[index]
        match = NAMES.match(line)
        if match:
            indent = len(match.group(1))
            names = [line.rstrip()]
            following = index + 1
            while following < len(lines) and NAMES.match(lines[following]) and \
                    len(lines[following]) - len(lines[following].lstrip()) > indent:
                names.append(lines[following].strip())
                following += 1
            if following < len(lines) and CONTINUED.match(lines[following]) and \
                    len(lines[following]) - len(lines[following].lstrip()) > indent:
                names.append(lines[following].strip())
                joined.append(" ".join(names))
                index = following + 1
                continue
        joined.append(line)
        index += 1
    return "\n".join(joined)


class JoinWrappedNames(griffe.Extension):
    """Joins the wrapped name lists of every docstring griffe loads."""

    def on_instance(self, *, node, obj, agent, **kwargs):
        if obj.docstring is not None:
            obj.docstring.value = join_wrapped_names(obj.docstring.value)

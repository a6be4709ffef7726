"""The flags of a resumed run: a flag left out takes the run's own value; a flag given must be the run's, except those
a resumed run may change (scripts.OPERATIONAL: --resume, --resume-changed-code, --checkpoint-every, --track and the
W&B project and entity, --save-model, --upload-model and --hf-entity: what is done with the run, not what it
computes), and what the program computed from its launch (the world size) must be the run's. Uses fileformat.py (for
BadCheckpoint).
"""

import dataclasses

from cleanrl_utils.checkpoint.fileformat import BadCheckpoint

# OPERATIONAL: what a resumed run may change
from cleanrl_utils.scripts import OPERATIONAL

# what each attempt of a run asks for itself; every other flag left out takes the run's own value (an upload needs
# cleanrl_utils.huggingface, which a script imports before its checkpoint is read)
ASKED_ANEW = ("resume", "resume_changed_code", "upload_model")

# computed from how the program was launched, not from its flags: a resumed run must be launched alike
LAUNCH = ("world_size",)


def field_defaults(args):
    """{field: its default} of the `Args` dataclass `args` is an instance of (the fields that have one)."""
    defaults = {}
    for field in dataclasses.fields(args):
        if field.default is not dataclasses.MISSING:
            defaults[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            defaults[field.name] = field.default_factory()
    return defaults


def flag(name):
    return f"--{name.replace('_', '-')}"


def computed_fields(args):
    """The fields of Args computed after parsing (annotated tyro.conf.Suppress): not flags."""
    hints = {f.name: f.type for f in dataclasses.fields(args)}
    return {name for name, hint in hints.items() if "Suppress" in str(hint)}


def given_fields(args, argv):
    """The fields of `args` that the command line `argv` sets (--flag value, --flag=value, --no-flag, either
    spelling); the others have their defaults."""
    names = {field.name for field in dataclasses.fields(args)}
    given = set()
    for word in argv:
        if not str(word).startswith("--"):
            continue
        name = str(word)[2:].partition("=")[0].replace("-", "_")
        if name not in names and name.startswith("no_"):
            name = name[3:]
        if name in names:
            given.add(name)
    return given


def take_run_flags(args, saved, argv, where):
    """Sets `args`, parsed from the command line `argv`, to the run's: the flags not given and the fields computed
    after parsing take the values `saved` in the checkpoint of the run at `where`; BadCheckpoint where a flag given
    differs from the run's and may not, or where the program was launched otherwise. Returns the run's values, a
    field the script has gained since the checkpoint was written counting as its default there."""
    computed = computed_fields(args)
    ours = vars(args)
    theirs = {**field_defaults(args), **saved}
    given = given_fields(args, argv)
    differ = [name for name in ours if name in given and name not in OPERATIONAL and ours[name] != theirs[name]]
    if differ:
        shown = ", ".join(f"{flag(name)} {theirs[name]}" for name in differ)
        raise BadCheckpoint(f"{where} was run with {shown}: give the run's own flags, or leave them out")
    launched = [name for name in LAUNCH if name in ours and ours[name] != theirs[name]]
    if launched:
        name = launched[0]
        raise BadCheckpoint(f"{where} was launched with {name} {theirs[name]}, this program with {ours[name]}")
    for name in ours:  # the run's own flags where none is given, and what it computed from them
        if name not in ASKED_ANEW and (name not in given or name in computed):
            setattr(args, name, theirs[name])
    return theirs

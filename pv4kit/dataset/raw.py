"""The raw release tree under one name: its layout, reading, writing and validation.

pv4kit's own modules import each name from the module that defines it; this module gathers them for
notebooks, scripts and tests (``from pv4kit.dataset.raw import read_user, validate_raw``):

* :mod:`pv4kit.dataset.formats`: how each file's text is read, written and checked (list files, chats,
  ``qa.csv``);
* :mod:`pv4kit.dataset.tree`: where the files sit, reading one user (:func:`read_user`) or the tree,
  writing a user folder, the files a dataset's fingerprint covers;
* :mod:`pv4kit.dataset.validate`: every problem of a tree with its file and line (:func:`validate_raw`).
"""

from __future__ import annotations

from pv4kit.dataset.formats import ASSISTANT_TAG, USER_TAG, check_chat, read_list
from pv4kit.dataset.tree import (
    RawUser,
    chat_files,
    duplicate_chats,
    input_files,
    list_personas,
    list_users,
    read_chats,
    read_hard_subset,
    read_persona_seeds,
    read_user,
    users_dir_of,
    write_user_files,
)
from pv4kit.dataset.validate import format_report, validate_raw

__all__ = [
    "ASSISTANT_TAG",
    "USER_TAG",
    "RawUser",
    "chat_files",
    "check_chat",
    "duplicate_chats",
    "format_report",
    "input_files",
    "list_personas",
    "list_users",
    "read_chats",
    "read_hard_subset",
    "read_list",
    "read_persona_seeds",
    "read_user",
    "users_dir_of",
    "validate_raw",
    "write_user_files",
]

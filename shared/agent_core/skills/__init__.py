"""Skills: ``SKILL.md`` files found in the operator's, the account's and the project's skill
folders, disclosed progressively (names and descriptions, then a body, then files on demand).

``docs/architecture.md``, "Skills" describes the folders, the frontmatter, precedence and how a
run loads a skill; :mod:`agent_core.skills.scan` finds them, :mod:`agent_core.skills.active` holds
one run's state, :mod:`agent_core.skills.tool` is ``load_skill``.
"""

from agent_core.skills.active import (
    LOAD_SKILL,
    RunSkills,
    SkillListing,
    invoked_skill,
    loaded_skills,
    skill_context_nodes,
    skill_metadata,
    skill_text,
)
from agent_core.skills.files import list_skill_files, read_skill_file
from agent_core.skills.frontmatter import parse_skill
from agent_core.skills.model import (
    Skill,
    SkillList,
    SkillProblem,
    SkillProblemCode,
    SkillSource,
    SkillView,
    valid_skill_name,
)
from agent_core.skills.scan import SkillCatalog, SkillFolder, scan_skills, skill_folders
from agent_core.skills.session import session_skills
from agent_core.skills.tool import LoadSkillTool

__all__ = [
    "LOAD_SKILL",
    "LoadSkillTool",
    "RunSkills",
    "Skill",
    "SkillCatalog",
    "SkillFolder",
    "SkillList",
    "SkillListing",
    "SkillProblem",
    "SkillProblemCode",
    "SkillSource",
    "SkillView",
    "invoked_skill",
    "list_skill_files",
    "loaded_skills",
    "parse_skill",
    "read_skill_file",
    "scan_skills",
    "session_skills",
    "skill_context_nodes",
    "skill_folders",
    "skill_metadata",
    "skill_text",
    "valid_skill_name",
]

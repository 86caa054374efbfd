// Where the cursor is in a YAML document, by indentation alone (the document being typed is
// rarely valid YAML, so no parser would do): the path of keys from the root to the mapping at a
// line, the keys that mapping already has, and the CRD schema node at a path.
export const KEY_LINE = /^(\s*)(- )?([^\s:#][^:#]*?):(?:\s.*)?$/;
export const ITEM = "[]";

function indentOf(text) {
  return text.length - text.trimStart().length;
}

function meaningful(text) {
  const trimmed = text.trim();
  return trimmed !== "" && !trimmed.startsWith("#") && trimmed !== "---";
}

// The path of keys from the document's root to the mapping that holds the text at `indent`
// on line `lineNumber` (list items are ITEM), found by walking up the lines by indentation.
export function parentPath(lines, lineNumber, indent, inItemAt) {
  const path = [];
  let level = indent;
  let dash = inItemAt; // the indentation of the "- " whose item we are in, or -1
  if (dash >= 0) path.unshift(ITEM);
  for (let n = lineNumber - 1; n >= 0 && (level > 0 || dash >= 0); n--) {
    const text = lines[n];
    if (!meaningful(text)) continue;
    const at = indentOf(text);
    const isDash = text.trimStart().startsWith("- ") || text.trim() === "-";
    if (dash >= 0) {
      // the key that holds the list: less indented than the dash, or as indented and no dash itself
      if (at < dash || (at === dash && !isDash)) {
        const match = KEY_LINE.exec(text);
        if (!match) return null;
        path.unshift(match[3].trim());
        level = at + (match[2] ? 2 : 0);
        dash = match[2] ? at : -1;
        if (dash >= 0) path.unshift(ITEM);
      }
      continue;
    }
    if (at >= level && !(isDash && at + 2 === level)) continue;
    if (isDash && at + 2 <= level) { // inside this list item: the item's keys are our siblings
      path.unshift(ITEM);
      dash = at;
      level = at;
      continue;
    }
    const match = KEY_LINE.exec(text);
    if (!match) return null;
    path.unshift(match[3].trim());
    level = at;
  }
  return path;
}

// The keys already set in the mapping that holds line `lineNumber` at `indent` (offered no more).
export function siblingKeys(lines, lineNumber, indent) {
  const keys = new Set();
  for (const step of [-1, 1]) {
    for (let n = lineNumber + step; n >= 0 && n < lines.length; n += step) {
      const text = lines[n];
      if (!meaningful(text)) continue;
      const at = indentOf(text);
      const match = KEY_LINE.exec(text);
      const dash = text.trimStart().startsWith("- ");
      if (dash && at + 2 === indent) { // the "- " of this list item (above) or of the next one (below)
        if (step < 0 && match) keys.add(match[3].trim());
        break;
      }
      if (at < indent) break; // left the mapping
      if (at === indent && !dash && match) keys.add(match[3].trim());
    }
  }
  return keys;
}

export function schemaAt(schema, path) {
  let node = schema;
  for (const step of path) {
    if (!node) return null;
    node = step === ITEM ? node.items : (node.properties || {})[step];
  }
  return node || null;
}

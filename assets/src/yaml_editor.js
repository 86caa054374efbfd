// The portal's YAML editor: CodeMirror 6 over a plain <textarea data-yaml-editor="SCHEMA_ID">, with
// YAML highlighting and completion of the fields the kind's CRD declares at the cursor (keys, enum
// values, booleans). The textarea stays the form field: every edit is copied back into it, so the
// form posts exactly as without JavaScript (where the textarea is simply shown).
import { EditorState } from "@codemirror/state";
import {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter, drawSelection,
} from "@codemirror/view";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { syntaxHighlighting, defaultHighlightStyle, indentOnInput, bracketMatching } from "@codemirror/language";
import { autocompletion, completionKeymap } from "@codemirror/autocomplete";
import { yaml } from "@codemirror/lang-yaml";

const KEY_LINE = /^(\s*)(- )?([^\s:#][^:#]*?):(?:\s.*)?$/;
const ITEM = "[]";

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

export function schemaAt(schema, path) {
  let node = schema;
  for (const step of path) {
    if (!node) return null;
    node = step === ITEM ? node.items : (node.properties || {})[step];
  }
  return node || null;
}

function describe(node) {
  const type = node["x-kubernetes-int-or-string"] ? "integer or string" : (node.type || "");
  return type + (node.enum ? ` (one of ${node.enum.join(", ")})` : "");
}

function keyOptions(node) {
  return Object.entries(node.properties || {}).map(([name, child]) => ({
    label: name,
    type: "property",
    detail: describe(child),
    info: child.description ? child.description.slice(0, 400) : undefined,
    apply: child.type === "object" || child.type === "array" ? `${name}:` : `${name}: `,
  }));
}

function valueOptions(node) {
  if (node.enum) return node.enum.map((value) => ({ label: String(value), type: "enum" }));
  if (node.type === "boolean") return ["true", "false"].map((label) => ({ label, type: "keyword" }));
  return [];
}

// Completion source: keys of the mapping at the cursor, or values of the key before it.
export function crdCompletions(schema) {
  return (context) => {
    const line = context.state.doc.lineAt(context.pos);
    const before = line.text.slice(0, context.pos - line.from);
    const lines = context.state.doc.toString().split("\n");
    const value = /^(\s*)(- )?([^\s:#][^:#]*?):\s+(\S*)$/.exec(before);
    const key = /^(\s*)(- )?([\w.\/-]*)$/.exec(before);
    if (value) {
      const indent = value[1].length + (value[2] ? 2 : 0);
      const path = parentPath(lines, line.number - 1, indent, value[2] ? value[1].length : -1);
      const node = path && schemaAt(schema, [...path, value[3].trim()]);
      const options = node ? valueOptions(node) : [];
      return options.length ? { from: context.pos - value[4].length, options } : null;
    }
    if (!key || (!context.explicit && key[3] === "" && !key[2])) return null;
    const indent = key[1].length + (key[2] ? 2 : 0);
    const path = parentPath(lines, line.number - 1, indent, key[2] ? key[1].length : -1);
    const node = path && schemaAt(schema, path);
    if (!node || !node.properties) return null;
    return { from: context.pos - key[3].length, options: keyOptions(node), validFor: /^[\w.\/-]*$/ };
  };
}

function upgrade(textarea) {
  const schemaElement = document.getElementById(textarea.dataset.yamlEditor);
  const schema = schemaElement ? JSON.parse(schemaElement.textContent) : {};
  const view = new EditorView({
    state: EditorState.create({
      doc: textarea.value,
      extensions: [
        lineNumbers(), highlightActiveLineGutter(), highlightActiveLine(), drawSelection(), history(),
        indentOnInput(), bracketMatching(), syntaxHighlighting(defaultHighlightStyle), yaml(),
        autocompletion({ override: [crdCompletions(schema)] }),
        keymap.of([...completionKeymap, ...defaultKeymap, ...historyKeymap, indentWithTab]),
        EditorView.updateListener.of((update) => {
          if (update.docChanged) textarea.value = update.state.doc.toString();
        }),
        EditorView.theme({ "&": { border: "1px solid #e3e8ee", background: "#fff" }, ".cm-scroller": { minHeight: "24rem" } }),
      ],
    }),
  });
  textarea.style.display = "none";
  textarea.insertAdjacentElement("afterend", view.dom);
  textarea.yamlEditor = view;
  return view;
}

function start() {
  document.querySelectorAll("textarea[data-yaml-editor]").forEach(upgrade);
}

if (typeof document === "undefined") {
  // imported outside a browser (the path tests): nothing to upgrade
} else if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();

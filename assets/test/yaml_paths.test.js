// node --test assets/test: where the cursor is in a YAML document being typed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ITEM, parentPath, schemaAt, siblingKeys } from "../src/yaml_paths.js";

const doc = `apiVersion: x
metadata:
  name: a
  labels:
    team: x
spec:
  containers:
  - name: x
    resources:
      limits:
        cpu: 1
    image: y
  dependencies:
    - a
  memory: 8Gi`.split("\n");

test("the path of the mapping at a line follows indentation and list items", () => {
  assert.deepEqual(parentPath(doc, 2, 2, -1), ["metadata"]);
  assert.deepEqual(parentPath(doc, 4, 4, -1), ["metadata", "labels"]);
  assert.deepEqual(parentPath(doc, 7, 4, 2), ["spec", "containers", ITEM]); // on the "- " line
  assert.deepEqual(parentPath(doc, 8, 4, -1), ["spec", "containers", ITEM]);
  assert.deepEqual(parentPath(doc, 10, 8, -1), ["spec", "containers", ITEM, "resources", "limits"]);
  assert.deepEqual(parentPath(doc, 11, 4, -1), ["spec", "containers", ITEM]);
  assert.deepEqual(parentPath(doc, 12, 2, -1), ["spec"]);
  assert.deepEqual(parentPath(doc, 14, 2, -1), ["spec"]);
  assert.deepEqual(parentPath(doc, 5, 0, -1), []);
});

test("keys already in the mapping are known, across list items only within the item", () => {
  assert.deepEqual([...siblingKeys(doc, 14, 2)].sort(), ["containers", "dependencies"]);
  assert.deepEqual([...siblingKeys(doc, 11, 4)].sort(), ["name", "resources"]);
  assert.deepEqual([...siblingKeys(doc, 5, 0)].sort(), ["apiVersion", "metadata"]);
});

test("the schema node at a path walks properties and items", () => {
  const schema = { properties: { spec: { properties: { containers: { items: { properties: { name: {} } } } } } } };
  assert.deepEqual(Object.keys(schemaAt(schema, ["spec", "containers", ITEM]).properties), ["name"]);
  assert.equal(schemaAt(schema, ["spec", "nothing"]), null);
});

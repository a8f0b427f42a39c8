"""Templates: a group of layers stored in the model and used as one layer.

A template definition is the XML text kept in ``Model.templates[name]`` (and inside ``<templates>`` of the
``.lnet`` file)::

    <template name="resblock">
      <inputs><input name="x"/><input name="skip"/></inputs>
      <layers>
        <layer name="c1" type="convolution" x="0" y="0">
          <param name="num_output_channels" value="16"/>
          <input index="0" source="$x"/>
        </layer>
        <layer name="add1" type="element_wise" x="220" y="0">
          <input index="0" source="c1"/><input index="1" source="$skip"/>
        </layer>
      </layers>
      <output source="add1"/>
      <exposed><param layer="c1" name="num_output_channels"/></exposed>
    </template>

* ``<inputs>`` are ordered: input ``i`` of an instance feeds every source ``$NAME`` of the ``i``-th input.
  Input 0 is primary (mandatory), the others are secondary (optional) like a weighted layer's extra inputs.
* ``<layers>`` uses the model file's ``<layer>`` syntax; positions are relative to the instance's position.
  A layer may itself be an instance of another template (nesting), never of its own template.
* ``<output>`` names the layer whose output is the instance's output. Every other layer must be read by
  some layer of the template.
* ``<exposed>`` lists the inner parameters an instance can set. They are instance parameters named
  ``<layer>.<param>`` (text, like every parameter); one an instance does not set keeps the definition's
  value. All instances of a template expose the same parameters.

An instance is an ordinary layer of type ``template:NAME``. ``template_desc`` describes it like a plugin
layer (inputs, exposed parameters, documentation) so the type checker, canvas, palette and parameter window
treat it as one; ``find_desc`` is the one lookup of a model layer's descriptor, template or not.

The preprocessor (``expand_templates``; ``Network`` calls it before the fusing rules) replaces every
instance by its layers, named ``<instance>__<layer>`` (``<outer>__<inner>__<layer>`` when nested), wires
the template inputs to the instance's sources and every reader of the instance to the output layer. An
activation set on an instance applies to the output layer; a permanent instance makes it permanent.
Weights of expanded layers are read under their expanded names.

Editing: ``group`` turns selected layers into a template and one instance, ``ungroup`` puts an instance's
layers back, ``add_model_as_template`` makes another model a template (``engine.modelfile.import_model_as_template``
reads it from its file), ``set_exposed`` chooses the exposed parameters, ``rename_template`` renames a template
and its instances. Each is one undoable step on the model.

The package is split by job: ``names`` (instance types, expanded names), ``format`` (the definition
format, ``TemplateDef``), ``descriptors`` (``find_desc``, ``template_desc``), ``checking``
(``check_template``), ``expansion`` (``expand``) and ``commands`` (the editing commands)."""
from __future__ import annotations

from engine.templates.checking import check_template
from engine.templates.commands import (
    add_model_as_template,
    add_templates,
    exposable,
    group,
    model_as_template,
    rename_template,
    set_exposed,
    templates_used,
    ungroup,
)
from engine.templates.descriptors import find_desc, readers_of, template_desc, template_descs
from engine.templates.expansion import Expansion, expand, expand_templates
from engine.templates.format import Exposed, TemplateDef, get_template, parse_template, template_xml
from engine.templates.names import (
    CATEGORY,
    SEP,
    TEMPLATE_PREFIX,
    has_instances,
    instances_of,
    template_name,
    template_type,
)

__all__ = [
    "CATEGORY", "SEP", "TEMPLATE_PREFIX", "Expansion", "Exposed", "TemplateDef", "add_model_as_template",
    "add_templates", "check_template", "expand", "expand_templates", "exposable", "find_desc", "get_template",
    "group", "has_instances", "instances_of", "model_as_template", "parse_template", "readers_of",
    "rename_template", "set_exposed", "template_desc", "template_descs", "template_name", "template_type",
    "template_xml", "templates_used", "ungroup",
]

"""The lark grammar of the OMG IDL subset the loader reads (IDL 4 core + XTypes annotations).

Kept inline (not as a package data file) so it ships with the module.
"""

GRAMMAR = r"""
start: definition*

?definition: module
           | struct_def ";"
           | struct_fwd ";"
           | enum_def ";"
           | typedef_def ";"
           | const_def ";"
           | DIRECTIVE -> directive

module: annotations "module" IDENT "{" definition* "}" ";"

struct_def: annotations "struct" IDENT [inherit] "{" member* "}"
struct_fwd: annotations "struct" IDENT
inherit: ":" scoped_name
member: annotations type_spec declarators ";"

enum_def: annotations "enum" IDENT "{" enumerator ("," enumerator)* ","? "}"
enumerator: annotations IDENT

typedef_def: annotations "typedef" type_spec declarators

const_def: "const" const_type IDENT "=" const_expr
?const_type: base_type | string_type | scoped_name

declarators: declarator ("," declarator)*
declarator: IDENT array_size*
array_size: "[" const_expr "]"

?type_spec: base_type | string_type | sequence_type | scoped_name

sequence_type: "sequence" "<" type_spec ["," const_expr] ">"
string_type: "string" ["<" const_expr ">"]      -> string_type
           | "wstring" ["<" const_expr ">"]     -> wstring_type

!base_type: "short" | "unsigned" "short" | "long" | "unsigned" "long"
          | "long" "long" | "unsigned" "long" "long" | "long" "double"
          | "int8" | "uint8" | "int16" | "uint16" | "int32" | "uint32" | "int64" | "uint64"
          | "float" | "double" | "char" | "wchar" | "boolean" | "octet"

annotations: annotation*
annotation: "@" scoped_name ("(" [annotation_params] ")")?
annotation_params: const_expr -> ann_value
                 | ann_named ("," ann_named)*
ann_named: IDENT "=" const_expr

scoped_name: ROOT? IDENT ("::" IDENT)*
ROOT: "::"

?const_expr: or_expr
?or_expr: xor_expr | or_expr "|" xor_expr -> bor
?xor_expr: and_expr | xor_expr "^" and_expr -> bxor
?and_expr: shift_expr | and_expr "&" shift_expr -> band
?shift_expr: add_expr | shift_expr "<<" add_expr -> shl | shift_expr ">>" add_expr -> shr
?add_expr: mul_expr | add_expr "+" mul_expr -> add | add_expr "-" mul_expr -> sub
?mul_expr: unary_expr | mul_expr "*" unary_expr -> mul | mul_expr "/" unary_expr -> div
         | mul_expr "%" unary_expr -> mod
?unary_expr: "-" primary -> neg | "+" primary | "~" primary -> inv | primary
?primary: scoped_name -> ref
        | INTEGER -> integer
        | FLOATING -> floating
        | STRING_LIT -> string
        | CHAR_LIT -> char
        | "TRUE" -> true
        | "FALSE" -> false
        | "(" const_expr ")"

INTEGER.2: /0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*/
FLOATING.3: /([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[dD]?|[0-9]+[eE][+-]?[0-9]+[dD]?/
STRING_LIT: /"(\\.|[^"\\])*"/
CHAR_LIT: /'(\\.|[^'\\])'/
IDENT: /[A-Za-z_][A-Za-z0-9_]*/
DIRECTIVE: /#[^\n]*/

COMMENT: /\/\/[^\n]*/ | /\/\*(.|\n)*?\*\//
%import common.WS
%ignore WS
%ignore COMMENT
"""

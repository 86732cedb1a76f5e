# crest_forbid_links(TARGET FORBIDDEN...): fails the configure step when
# TARGET links any FORBIDDEN target, directly or through any library it links.
# Called at the end of the top-level CMakeLists.txt, once every target exists.
# The `crest` CLI uses it to stay a client: it must never link a server part.

function(_crest_collect_links target out_var)
  set(seen "")
  set(queue ${target})
  while(queue)
    list(POP_FRONT queue current)
    if(NOT TARGET ${current} OR current IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${current})
    get_target_property(type ${current} TYPE)
    set(deps "")
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(direct ${current} LINK_LIBRARIES)
      if(direct)
        list(APPEND deps ${direct})
      endif()
    endif()
    get_target_property(iface ${current} INTERFACE_LINK_LIBRARIES)
    if(iface)
      list(APPEND deps ${iface})
    endif()
    foreach(dep IN LISTS deps)
      # $<LINK_ONLY:x> and similar wrappers name a target all the same.
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" dep "${dep}")
      if(TARGET ${dep})
        list(APPEND queue ${dep})
      endif()
    endforeach()
  endwhile()
  set(${out_var} ${seen} PARENT_SCOPE)
endfunction()

function(crest_forbid_links target)
  _crest_collect_links(${target} linked)
  foreach(forbidden IN LISTS ARGN)
    if(forbidden IN_LIST linked)
      message(FATAL_ERROR
        "${target} must not link ${forbidden}, directly or through a library it links. "
        "Move what it needs into a library without server parts.")
    endif()
  endforeach()
endfunction()
